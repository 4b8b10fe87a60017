"""A fork server for the Python processes a local Spark starts: each imports pyspark, pyarrow,
pandas and kstool anew, the streaming source's runner (0.5 CPU-s of imports, measured),
transformWithState's pre-init runner (0.2), each data source planner's daemon (0.2), the task
workers' daemon (1.0), in every run, over and over in a long-lived JVM (the warm engine's, a
test session's). This server imports them once and forks each process from itself.

kstool starts it beside its JVM (`forking_pythons`); KSTOOL_PYTHON_FORKS in the JVM's
environment names its socket. The launcher Spark runs as Python (kstool.engine.spark.spark_home)
hands a `python -m MODULE ...` to the relay (python_forks_relay), which sends the server its
arguments, environment, folder and standard streams and stands for the forked process towards
the JVM: it passes signals on and exits as the process does. What a fresh interpreter would do
differently is refused, and the relay starts Python as before: another Python, a PYTHONPATH entry
the server lacks, interpreter settings (STARTUP_ENV) other than the server's.

The server is single-threaded (a fork copies no thread), lives while the kstool process that
started it does, and its forked processes die with it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import runpy
import secrets
import selectors
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from kstool.base.processes import inherited_variable

ADDRESS_ENV = "KSTOOL_PYTHON_FORKS"
# What Spark gives the Python processes it starts (PythonWorkerFactory, Spark 4.3), read by CPython
# when it starts: the server starts with them, so that a forked process is what a fresh one would
# be. And numpy's OpenBLAS on one thread, as kstool's settings give the tasks
# (kstool.engine.spark.session): the planners, which Spark starts without those, get it too
SPARK_PYTHON_ENV = {"PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "YES", "PYTHONDONTWRITEBYTECODE": "1",
                    "OPENBLAS_NUM_THREADS": "1"}
# the environment CPython reads when it starts: a request that differs from the server in any is refused
STARTUP_ENV = ("PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONOPTIMIZE", "PYTHONWARNINGS",
               "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONMALLOC", "PYTHONDEVMODE", "PYTHONFAULTHANDLER",
               "PYTHONTRACEMALLOC", "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONINTMAXSTRDIGITS", "PYTHONPLATLIBDIR",
               "PYTHONHOME", "PYTHONUSERBASE", "PYTHONPYCACHEPREFIX", "PYTHONVERBOSE", "PYTHONDEBUG", "PYTHONINSPECT",
               "PYTHONCOERCECLOCALE", "PYTHONNODEBUGRANGES", "PYTHONWARNDEFAULTENCODING", "PYTHONPERFSUPPORT",
               "LC_ALL", "LC_CTYPE", "LANG")
# the modules of the processes a local run starts (`ps` during one): the task workers' daemon
# brings pandas, pyarrow and kstool's executor I/O
PRELOADED = ("kstool.engine.spark.python_daemon", "kstool.engine.io.source", "pyspark.sql.worker.lookup_data_sources",
             "pyspark.sql.worker.create_data_source", "pyspark.sql.worker.plan_data_source_read",
             "pyspark.sql.streaming.python_streaming_source_runner",
             "pyspark.sql.streaming.transform_with_state_driver_worker")
_PR_SET_PDEATHSIG = 1
_FIELDS = b"\0"


def _address(token: str) -> bytes:
    return b"\0kstool-python-forks-" + token.encode()  # abstract: no file to leave behind


@contextlib.contextmanager
def forking_pythons(log: Path | None) -> Iterator[None]:
    """While a JVM is launched: a fork server of this process's own, its address in the
    environment the JVM inherits (then as it was). A server that cannot start leaves Spark's
    Python processes as they were (the relay finds no server), as does a system without pidfds
    (Linux before 5.3), by which the server follows the life of this process and of its own."""
    if not hasattr(os, "pidfd_open"):
        yield
        return
    token = secrets.token_hex(8)
    with open(log or os.devnull, "ab") as sink:
        subprocess.Popen([sys.executable, "-m", __name__, token, str(os.getpid())], env={**os.environ, **SPARK_PYTHON_ENV},
                         stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, start_new_session=True)
    with inherited_variable(ADDRESS_ENV, token):
        yield


_Request = tuple[str, str, int, list[str], dict[str, str]]


def _decode_request(data: bytes) -> _Request | None:
    """What python_forks_relay sends: Python, folder, umask, argument count, arguments,
    environment; None for anything else."""
    fields = data.split(_FIELDS)
    try:
        argc = int(fields[3])
        argv = [a.decode() for a in fields[4:4 + argc]]
        env = dict(entry.decode("utf-8", "surrogateescape").partition("=")[::2] for entry in fields[4 + argc:])
        return fields[0].decode(), fields[1].decode(), int(fields[2], 8), argv, env
    except (ValueError, IndexError):
        return None


class _Server:
    def __init__(self, listener: socket.socket, parent: int):
        self.selector = selectors.DefaultSelector()
        self.listener = listener
        self.selector.register(self.listener, selectors.EVENT_READ, self._accept)
        self.parent = os.pidfd_open(parent)
        self.selector.register(self.parent, selectors.EVENT_READ, self._parent_gone)
        self.children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, its relay)
        self.startup_env = {name: os.environ.get(name) for name in STARTUP_ENV}
        self.path = {os.path.realpath(entry) for entry in sys.path if entry}
        self.running = True

    def serve(self) -> str | None:
        """Runs until the parent exits; returns, in a forked process only, the module to run."""
        while self.running:
            for key, _ in self.selector.select():
                module: str | None = key.data(key.fileobj)
                if module is not None:
                    return module
        return None

    def _accept(self, listener: socket.socket) -> None:
        try:
            relay, _ = listener.accept()
        except OSError:  # out of file descriptors, for one: that relay starts its Python fresh
            return
        uid = struct.unpack("3i", relay.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
        if uid != os.getuid():  # the address is abstract: any local user could reach it
            relay.close()
            return
        self.selector.register(relay, selectors.EVENT_READ, self._request)

    def _request(self, relay: socket.socket) -> str | None:
        self.selector.unregister(relay)
        try:
            data, fds, _, _ = socket.recv_fds(relay, 1 << 20, 3)
        except OSError:
            relay.close()
            return None
        request = _decode_request(data)
        refusal = self._refusal(request, fds)
        if request is None or refusal:
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):
                relay.send(b"refused " + refusal.encode())
            relay.close()
            return None
        _, cwd, umask, argv, env = request
        try:
            pid = os.fork()
        except OSError:  # out of memory or processes: the relay starts its Python fresh, if it can
            pid = -1
        if pid == 0:
            return self._become(relay, fds, cwd, umask, argv, env)
        for fd in fds:
            os.close(fd)
        if pid < 0:
            relay.close()
            return None
        try:
            relay.send(b"served %d" % pid)
        except OSError:  # the relay is gone: so must its process be
            os.kill(pid, signal.SIGKILL)
        child = os.pidfd_open(pid)
        self.children[child] = (pid, relay)
        self.selector.register(child, selectors.EVENT_READ, self._exited)
        self.selector.register(relay, selectors.EVENT_READ, self._relay_gone)
        return None

    def _refusal(self, request: _Request | None, fds: list[int]) -> str:
        if len(fds) != 3:
            return "no standard streams"
        if request is None:
            return "not a request"
        executable, _, _, argv, env = request
        if executable != sys.executable:
            return f"another Python ({executable})"
        if len(argv) < 2 or argv[0] != "-m":
            return "not a module"
        differing = [name for name in STARTUP_ENV if env.get(name) != self.startup_env[name]]
        if differing:
            return f"interpreter settings of its own: {', '.join(differing)}"
        foreign = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep)
                   if entry and os.path.exists(entry) and os.path.realpath(entry) not in self.path]
        return f"a path of its own: {foreign[0]}" if foreign else ""

    def _become(self, relay: socket.socket, fds: list[int], cwd: str, umask: int, argv: list[str],
                env: dict[str, str]) -> str:
        """In the forked process: the server's sockets closed, the relay's streams as its own,
        its folder, umask and environment; dies with the server."""
        # the listener, relays and pidfds; a socket through its object, which would otherwise
        # close its number again when collected, by then perhaps a descriptor of the process's own
        for key in list(self.selector.get_map().values()):
            if isinstance(key.fileobj, socket.socket):
                key.fileobj.close()
            else:
                os.close(key.fd)
        relay.close()
        self.selector.close()
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(cwd)
        os.umask(umask)
        os.environ.clear()
        os.environ.update(env)
        sys.path[0] = cwd  # as `python -m` puts it
        sys.argv = argv[:1] + argv[2:]
        sys.modules.pop(argv[1], None)  # a fresh Python imports the module it runs as __main__ only
        return argv[1]

    def _exited(self, child: int) -> None:
        pid, relay = self.children.pop(child)
        self.selector.unregister(child)
        os.close(child)
        _, status = os.waitpid(pid, 0)
        with contextlib.suppress(KeyError):  # unregistered when it went first
            self.selector.unregister(relay)
        with contextlib.suppress(OSError):
            relay.send(b"exit %d" % status)
        relay.close()

    def _relay_gone(self, relay: socket.socket) -> None:
        """A relay writes nothing after its request: readable means it is gone (killed with the
        JVM, or by it), and so must its process be; reaped by _exited."""
        self.selector.unregister(relay)
        for pid, other in self.children.values():
            if other is relay:
                os.kill(pid, signal.SIGKILL)

    def _parent_gone(self, _: int) -> None:
        self.running = False


def _main(token: str, parent: int) -> str | None:
    # listening before the imports: the JVM asks for its first processes while they run, and
    # those wait for them instead of importing the same modules in a process of their own
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(_address(token))
    listener.listen(64)
    for module in PRELOADED:
        __import__(module)
    if len(os.listdir("/proc/self/task")) != 1:
        print("kstool: the Python fork server's imports started a thread; not serving", file=sys.stderr)
        return None
    if os.getppid() != parent:  # the kstool process is gone already
        return None
    import gc

    gc.freeze()  # forked processes do not scan (nor copy) what the server imported
    return _Server(listener, parent).serve()


def _run_as_main(module: str) -> None:
    """In a forked process: the module as `python -m` runs it, and the interpreter's exit without
    its teardown, which decrefs every object the server imported: 70 ms of CPU (measured) for
    the pages the fork shares, copied then thrown away. What the exit owes the program is done:
    non-daemon threads joined, atexit functions run, standard streams flushed."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    code = 0
    try:
        runpy._run_module_as_main(module)  # type: ignore[attr-defined]
    except SystemExit as exit_:
        code = _exit_code(exit_.code)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException as error:  # what the interpreter does with an uncaught exception
        sys.excepthook(type(error), error, error.__traceback__)
        code = 1
    import atexit
    import threading

    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the kstool process's Ctrl-C is its own to handle
    chosen = _main(sys.argv[1], int(sys.argv[2]))
    if chosen is not None:
        _run_as_main(chosen)
