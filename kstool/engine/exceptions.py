from kstool.base.errors import KstoolError


class QueryFailedError(KstoolError):
    pass


class DataLossError(KstoolError):
    pass


class JavaMissingError(KstoolError):
    pass
