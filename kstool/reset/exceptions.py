from kstool.base.errors import KstoolError, UsageError


class ResetRefusedError(KstoolError):
    """The reset would be unsafe now (e.g. the app still has active members)."""


class ResetPlanError(UsageError):
    """The reset cannot be planned from what was given."""


class ResetIncompleteError(KstoolError):
    """A step failed: the message says what was applied and what was not."""
