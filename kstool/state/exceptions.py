from kstool.base.errors import KstoolError, NotFoundError, UsageError


class StoreNotFoundError(NotFoundError):
    pass


class KeyNotFoundError(NotFoundError):
    pass


class UnsupportedQueryError(UsageError):
    """The store or the backend cannot answer this kind of query."""


class StateReadError(KstoolError):
    pass
