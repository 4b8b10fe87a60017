from kstool.base.errors import KstoolError


class BrokerError(KstoolError):
    pass


class BrokerNotInstalledError(BrokerError):
    pass


class PortInUseError(BrokerError):
    pass
