from kstool.errors import BusyError, KstoolError, UsageError


class AppBusyError(BusyError):
    pass


class IncompatibleRunError(UsageError):
    """The run's parameters contradict the app's manifest; running would corrupt its state."""


class QueryFailedError(KstoolError):
    pass


class DataLossError(KstoolError):
    pass
