from kstool.base.errors import KstoolError


class BrokerError(KstoolError):
    pass


class BrokerNotInstalledError(BrokerError):
    pass


class PortInUseError(BrokerError):
    pass


class BrokerStoppedError(BrokerError):
    """This home's embedded broker is stopped and no other broker was named."""
