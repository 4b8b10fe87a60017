from kstool.errors import BusyError, UsageError


class AppBusyError(BusyError):
    pass


class IncompatibleRunError(UsageError):
    """The run's parameters contradict the app's manifest; running would corrupt its state."""
