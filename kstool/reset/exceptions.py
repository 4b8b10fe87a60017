from kstool.base.errors import BusyError, KstoolError, UsageError


class ResetRefusedError(KstoolError):
    """The reset would be unsafe now (e.g. no state where it was said to be)."""


class GroupActiveError(BusyError):
    """The app's group has active members: the app runs (exit 75, cron may retry later)."""


class ResetPlanError(UsageError):
    """The reset cannot be planned from what was given."""


class ResetIncompleteError(KstoolError):
    """A step failed: the message says what was applied and what was not."""
