from kstool.base.errors import KstoolError


class LagLimitError(KstoolError):
    """`apps top --fail-on-lag`: an app or group waits on records older than the limit."""
