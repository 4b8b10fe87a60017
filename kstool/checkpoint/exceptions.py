from kstool.base.errors import KstoolError


class CheckpointLocationError(KstoolError):
    """The checkpoint's file system cannot be reached or read."""
