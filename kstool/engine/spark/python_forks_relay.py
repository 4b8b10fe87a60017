"""The process Spark starts for a `python -m MODULE ...` when a fork server runs
(kstool.engine.spark.python_forks): it asks the server for that process and stands for it
towards the JVM, whose pipes it hands over, passing signals on and exiting as it exits; where
there is no server, or the server refuses, it becomes Python as the launcher would have.

Run by `python -S -I` (no site, no user path: ~10 ms): the standard library only."""

import os
import signal
import socket
import sys

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
child = 0
pending: list[int] = []


def _forward(signum: int, _frame: object) -> None:
    if child:
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass
    else:
        pending.append(signum)


def _request(argv: list[str]) -> bytes:
    umask = os.umask(0)
    os.umask(umask)
    fields = [os.fsencode(sys.executable), os.fsencode(os.getcwd()), b"%o" % umask, b"%d" % len(argv),
              *(os.fsencode(arg) for arg in argv), *(key + b"=" + value for key, value in os.environb.items())]
    return b"\0".join(fields)


def _served(argv: list[str]) -> tuple[socket.socket, int] | None:
    try:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server.connect(b"\0kstool-python-forks-" + os.environb[b"KSTOOL_PYTHON_FORKS"])
        socket.send_fds(server, [_request(argv)], [0, 1, 2])
        reply = server.recv(4096).split()
    except (OSError, KeyError):  # no server (or no address: the launcher gives one)
        return None
    return (server, int(reply[1])) if reply[:1] == [b"served"] else None


def main() -> None:
    global child
    for signum in FORWARDED:
        signal.signal(signum, _forward)
    argv = sys.argv[1:]
    served = _served(argv)
    if served is None:
        for signum in FORWARDED:
            signal.signal(signum, signal.SIG_DFL)
        for received in pending:
            os.kill(os.getpid(), received)
        os.execv(sys.executable, [sys.executable, *argv])
    server, child = served
    for received in pending:
        os.kill(child, received)
    reply = server.recv(64).split()
    if reply[:1] != [b"exit"]:  # the server is gone, and its processes with it
        os.kill(os.getpid(), signal.SIGKILL)
    status = int(reply[1])
    if os.WIFSIGNALED(status):  # died of a signal: so does its stand-in
        died_of = os.WTERMSIG(status)
        if died_of != signal.SIGKILL:  # the one whose action cannot be set (nor changed from its default)
            signal.signal(died_of, signal.SIG_DFL)  # SIGPIPE, for one, Python ignores
        os.kill(os.getpid(), died_of)
    os._exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
