"""Domain errors and the exit codes they map to (the one place that decides exit codes)."""

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 1
EXIT_BUSY = 75  # EX_TEMPFAIL: cron may retry later
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it (143 for SIGTERM)


class KstoolError(Exception):
    """An expected failure: reported as one line on stderr, no traceback."""

    exit_code = EXIT_FAILURE


class UsageError(KstoolError):
    """The user's input is invalid; nothing was done."""

    exit_code = EXIT_USAGE


class NotFoundError(KstoolError):
    exit_code = EXIT_NOT_FOUND


class BusyError(KstoolError):
    """Another instance holds the resource (e.g. the app is already running)."""

    exit_code = EXIT_BUSY


class BrokerUnreachableError(KstoolError):
    pass


class Interrupted(KstoolError):
    """Ctrl-C (or SIGTERM) cut bounded work short: the message says how far it got."""

    exit_code = EXIT_INTERRUPTED

    def __init__(self, message: str, signum: int = 2):
        super().__init__(message)
        self.exit_code = 128 + signum  # as shells report a process that a signal ended
