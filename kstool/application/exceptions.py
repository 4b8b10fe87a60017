from kstool.base.errors import BusyError, KstoolError, UsageError


class AppBusyError(BusyError):
    pass


class IncompatibleRunError(UsageError):
    """The run's parameters contradict the app's manifest; running would corrupt its state."""


class StateMissingError(KstoolError):
    """The checkpoint names committed batches whose state files are gone."""


class StateLayoutError(KstoolError):
    """The checkpoint keeps its stores in a layout this kstool no longer runs."""
