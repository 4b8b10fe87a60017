"""The engine process: one Spark session kept warm, serving clients on a private local socket.

A client asks for a call: a kstool library function (run_app, reprocess, a state read) and its
arguments. The engine runs it in a thread of its own, on the warm session, and sends back the
run's progress, then its result or its error. The client's Ctrl-C (or its going away) asks the
run to stop after the current batch, exactly as a signal does to a run of its own
(kstool.engine.stopping). `python -m kstool.engine.daemon.server --master URL ...`
(EngineSettings.arguments); started by `kstool engine start` or by the first command that wants
an engine, which wait for the socket. It stops by itself after its idle timeout: no call hosted
for that long (status questions do not count).
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import pickle
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kstool import __version__
from kstool.application.model import hosted_for
from kstool.base.documents import EngineRun, EngineStatus
from kstool.base.errors import KstoolError
from kstool.base.home import private_dir, write_private_text
from kstool.engine.daemon.exceptions import RemoteError
from kstool.engine.daemon.protocol import (
    DEFAULT_IDLE_MS,
    DEFAULT_MAX_PARKED,
    MAX_SOCKET_PATH,
    STARTING,
    EnginePaths,
    EngineSettings,
    needs_own_spark,
    receive,
    send,
)
from kstool.engine.progress import BatchStatus
from kstool.engine.query.parking import ParkedQueries
from kstool.engine.query.placement import Placement
from kstool.engine.spark.session import SparkOptions
from kstool.engine.spark.state_stores import close_loaded_state_stores
from kstool.engine.stopping import hosted
from kstool.kafka.client import KafkaClients

_log = logging.getLogger("kstool.engine")


@dataclass
class HostedCall:
    name: str  # the app id, or what the call reads
    client_pid: int
    started: float = field(default_factory=time.time)
    stop: threading.Event = field(default_factory=threading.Event)
    by_engine: bool = False  # the engine's own stop asked it to stop, not its client


class RemoteProgress:
    """A Progress whose calls go to the client, which renders them as it would its own."""

    def __init__(self, sock: socket.socket, lock: threading.Lock):
        self.sock, self.lock = sock, lock

    def _forward(self, method: str, *args: Any) -> None:
        try:
            with self.lock:
                send(self.sock, ("progress", method, args))
        except OSError:
            pass  # the client went away: the run is stopping after its batch

    def message(self, text: str) -> None:
        self._forward("message", text)

    def batch(self, status: BatchStatus) -> None:
        self._forward("batch", status)

    def close(self) -> None:
        self._forward("close")


class Engine:
    def __init__(self, paths: EnginePaths, settings: EngineSettings):
        self.paths, self.settings, self.master = paths, settings, settings.master
        self.started = self.last_used = time.time()
        self.calls: dict[int, HostedCall] = {}
        self.calls_lock = threading.Lock()
        self.closing = threading.Event()
        self.spark: Any = None
        self.parked = ParkedQueries(settings.max_parked)
        self.placement = Placement(self.parked)  # what a run it hosts is told: where it runs, its queries parked here

    def idle_s(self) -> float:
        """Seconds since the engine last hosted anything (0 while it hosts a call)."""
        with self.calls_lock:
            return 0.0 if self.calls else time.time() - self.last_used

    def used(self) -> None:
        self.last_used = time.time()

    def status(self) -> EngineStatus:
        runtime = self.spark._jvm.java.lang.Runtime.getRuntime()
        with self.calls_lock:
            calls: list[EngineRun] = [
                {"name": c.name, "client_pid": c.client_pid, "running_s": round(time.time() - c.started, 1)}
                for c in self.calls.values()]
        return {"running": True, "pid": os.getpid(), "version": __version__, "master": self.master,
                "uptime_s": round(time.time() - self.started, 1),
                "jvm_heap_used_bytes": runtime.totalMemory() - runtime.freeMemory(),
                "jvm_heap_max_bytes": runtime.maxMemory(), "runs": calls, "parked": self.parked.apps(),
                "max_parked": self.settings.max_parked, "idle_s": round(self.idle_s(), 1),
                "idle_timeout_s": self.settings.idle_timeout_ms / 1000,
                "socket": str(self.paths.socket), "log": str(self.paths.log)}

    def refusal(self, request: dict[str, Any]) -> str | None:
        """Why this engine cannot host the call (the client then runs it itself), or None."""
        if request.get("version") != __version__ or request.get("prefix") != sys.prefix:
            return f"the engine runs kstool {__version__} from {sys.prefix}"
        if self.closing.is_set():
            return "the engine is stopping"
        spark: SparkOptions | None = request.get("spark")
        if spark is not None and spark.master not in (SparkOptions.master, self.master):
            return f"the engine runs on {self.master}, this run asks for {spark.master}"
        return needs_own_spark(spark)

    def handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                request = receive(conn)
            except (EOFError, OSError):
                return
            op = request.get("op")
            if op == "status":
                send(conn, ("result", self.status()))
            elif op == "shutdown":
                send(conn, ("result", self.status()))
                self.shut_down()
            elif op == "release":
                self.used()
                released = self.parked.release(Path(request["app"]))
                if released:
                    _log.info("%s: parked query stopped for another use of the app", request["app"])
                send(conn, ("result", released))
            elif op == "free":
                self.used()
                self.parked.stop_all()
                close_loaded_state_stores()
                _log.info("%s: parked queries stopped and state stores closed for a checkpoint change", request["app"])
                send(conn, ("result", True))
            elif op == "call":
                self.host(conn, request)

    def host(self, conn: socket.socket, request: dict[str, Any]) -> None:
        refusal = self.refusal(request)
        if refusal:
            send(conn, ("refused", refusal))
            return
        call = HostedCall(request["name"], request["client_pid"])
        send(conn, ("accepted", None))  # from here on, a client that loses the engine loses a run
        send_lock = threading.Lock()
        with self.calls_lock:
            self.calls[id(call)] = call
        threading.Thread(target=self._watch_client, args=(conn, call), daemon=True).start()
        try:
            fn, args = request["fn"], request["args"]
            _log.info("%s: %s for client pid %s", call.name, fn.__qualname__, call.client_pid)
            with hosted(call.stop), hosted_for(call.client_pid):
                clients = KafkaClients(request["config"]) if request["config"] is not None else None
                result = fn(clients, *args, RemoteProgress(conn, send_lock), placement=self.placement)
            # a run the engine stopped did not end as its client asked: the client says so and fails
            reply: tuple[str, Any] = ("stopped" if call.by_engine else "result", result)
        except KstoolError as exc:
            reply = ("error", _portable(exc))
        except BaseException as exc:  # a bug: logged here in full; the client gets kstool's one line
            _log.error("%s failed:\n%s", call.name, traceback.format_exc())
            first_line = (str(exc).strip().splitlines() or [""])[0][:300]
            reply = ("error", RemoteError(f"unexpected {type(exc).__name__}: {first_line} "
                                          f"(the engine's log: {self.paths.log})", 1))
        finally:
            with self.calls_lock:
                self.calls.pop(id(call), None)
                self.used()
        try:
            with send_lock:
                send(conn, reply)
        except OSError:
            pass

    @staticmethod
    def _watch_client(conn: socket.socket, call: HostedCall) -> None:
        """A stop request, or the client gone (closed, killed): the run stops after its batch."""
        try:
            while not call.stop.is_set():
                if receive(conn) == "stop":
                    call.stop.set()
        except (EOFError, OSError):
            call.stop.set()

    def shut_down(self) -> None:
        """Stop taking calls; hosted runs stop after their current batch."""
        self.closing.set()
        with self.calls_lock:
            for call in self.calls.values():
                call.by_engine = True
                call.stop.set()


def _portable(error: KstoolError) -> KstoolError:
    """The error as the client will raise it: itself when it comes through pickling unchanged,
    else its message and exit code (an error whose __init__ builds the message from other
    arguments would come back garbled)."""
    try:
        back = pickle.loads(pickle.dumps(error))
        if type(back) is type(error) and str(back) == str(error):
            return error
    except Exception:
        pass
    return RemoteError(str(error), error.exit_code)


def _listen(paths: EnginePaths) -> socket.socket:
    path = str(paths.socket)
    if len(path.encode()) > MAX_SOCKET_PATH:
        raise SystemExit(f"kstool: error: the engine's socket path is too long for a local socket "
                         f"({len(path)} bytes): {path}; set KSTOOL_HOME to a shorter path")
    paths.socket.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)  # the socket is created 0600: only its owner may connect
    try:
        server.bind(path)
    finally:
        os.umask(previous)
    server.listen(16)
    server.settimeout(0.5)
    return server


def _socket_is(paths: EnginePaths, inode: int) -> bool:
    try:
        return paths.socket.stat().st_ino == inode
    except FileNotFoundError:
        return False


# an engine that has stopped serving holds its lock until its process has ended (Spark's stop,
# exit handlers): a new engine started right then waits that long rather than give up
LOCK_WAIT_S = 10.0


def _take_lock(fd: int) -> bool:
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def serve(settings: EngineSettings) -> int:
    paths = EnginePaths.of_home()
    private_dir(paths.root)
    lock = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
    if not _take_lock(lock):
        sys.stderr.write("kstool: error: an engine already runs for this kstool home\n")
        return 75
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    from kstool.engine.spark.session import build_session

    engine = Engine(paths, settings)
    memory = {"spark.driver.memory": settings.driver_memory} if settings.driver_memory else {}
    engine.spark, _ = build_session(SparkOptions(master=settings.master, conf=memory, long_lived=True),
                                    app_name="kstool-engine", log_file=paths.spark_log,
                                    say=lambda text: _log.info("%s%s", STARTING, text))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: engine.shut_down())
    server = _listen(paths)
    listening = paths.socket.stat().st_ino
    engine.used()  # idle from now: the session's start is not idle time
    write_private_text(paths.pid_file, str(os.getpid()))
    _log.info("engine %s ready on %s (master %s, stops after %s idle)", os.getpid(), paths.socket, settings.master,
              settings.idle_text())
    workers: list[threading.Thread] = []
    try:
        while not engine.closing.is_set():
            if settings.idle_timeout_ms and engine.idle_s() * 1000 > settings.idle_timeout_ms:
                _log.info("idle for %s: stopping", settings.idle_text())
                engine.shut_down()
                break
            if not _socket_is(paths, listening):  # no kstool command can find it any more
                _log.info("its socket %s is gone (the kstool home deleted?): stopping", paths.socket)
                engine.shut_down()
                break
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            worker = threading.Thread(target=engine.handle, args=(conn,), daemon=True)
            worker.start()
            workers = [w for w in workers if w.is_alive()] + [worker]
    finally:
        server.close()
        paths.socket.unlink(missing_ok=True)
        for worker in workers:
            worker.join()  # hosted runs finish their current batch
        engine.parked.stop_all()
        paths.pid_file.unlink(missing_ok=True)
        _log.info("engine %s stopped", os.getpid())
        engine.spark.stop()
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="kstool-engine")
    parser.add_argument("--master", default=SparkOptions.master)
    parser.add_argument("--idle-timeout-ms", type=int, default=DEFAULT_IDLE_MS)
    parser.add_argument("--max-parked", type=int, default=DEFAULT_MAX_PARKED)
    parser.add_argument("--driver-memory")
    args = parser.parse_args()
    sys.exit(serve(EngineSettings(args.master, args.idle_timeout_ms, args.driver_memory, args.max_parked)))


if __name__ == "__main__":
    main()
