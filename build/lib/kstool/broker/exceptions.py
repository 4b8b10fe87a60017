from kstool.errors import KstoolError


class BrokerError(KstoolError):
    pass


class BrokerNotInstalledError(BrokerError):
    pass


class PortInUseError(BrokerError):
    pass
