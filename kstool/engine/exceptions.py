from kstool.base.errors import KstoolError


class QueryFailedError(KstoolError):
    pass


class SourceProcessDiedError(QueryFailedError):
    """The Python process that plans the query's batches (Spark's streaming source runner)
    ended without a word: a crash of the process, not an error of the run."""


class HeapExhaustedError(QueryFailedError):
    """Spark's JVM ran out of heap during the run (its log says so; the query's own error
    shows only what that did to a Python worker)."""


class DataLossError(KstoolError):
    pass


class JavaMissingError(KstoolError):
    pass
