from kstool.errors import KstoolError


class QueryFailedError(KstoolError):
    pass


class DataLossError(KstoolError):
    pass


class JavaMissingError(KstoolError):
    pass
