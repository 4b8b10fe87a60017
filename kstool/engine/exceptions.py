from kstool.errors import KstoolError


class QueryFailedError(KstoolError):
    pass


class DataLossError(KstoolError):
    pass
