"""The thin side of the warm engine: start, stop and ask it, and hand it the Spark work of a
command. Imports neither pyspark nor pandas: a command that the engine runs starts in the time
Python takes to load kstool's CLI."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, cast

from kstool import __version__
from kstool.base.documents import EngineStatus
from kstool.base.home import private_dir
from kstool.base.processes import pid_alive
from kstool.engine.daemon.exceptions import (
    EngineError,
    EngineLostError,
    EngineNotRunningError,
    EngineRunningError,
    EngineStoppedRunError,
)
from kstool.engine.daemon.protocol import (
    ENGINE_ENV,
    STARTING,
    EnginePaths,
    EngineSettings,
    connect,
    needs_own_spark,
    receive,
    send,
)
from kstool.engine.progress import Progress
from kstool.engine.query.placement import HERE
from kstool.engine.spark.session import SparkOptions
from kstool.engine.stopping import note_stop_signal
from kstool.kafka.client import KafkaClients


def _ask(paths: EnginePaths, op: str, timeout_s: float) -> dict[str, Any]:
    with connect(paths) as sock:
        sock.settimeout(timeout_s)
        try:
            send(sock, {"op": op})
            _, value = receive(sock)
        except (EOFError, OSError) as exc:
            raise EngineError(f"the engine did not answer ({exc}); its log: {paths.log}") from None
    return cast(dict[str, Any], value)


def engine_status(paths: EnginePaths | None = None, timeout_s: float = 10.0) -> EngineStatus:
    """The engine's status document, or {"running": false}."""
    paths = paths or EnginePaths.of_home()
    try:
        try:
            return cast(EngineStatus, _ask(paths, "status", timeout_s))
        except EngineNotRunningError:
            raise
        except EngineError:
            # an engine that stops serving drops the connections it has not answered: asked
            # again, it is gone (its socket closed) or it answers
            return cast(EngineStatus, _ask(paths, "status", timeout_s))
    except EngineNotRunningError:
        return EngineStatus(running=False)


def start_engine(settings: EngineSettings, timeout_s: float = 300.0) -> EngineStatus:
    """Start the engine in the background; returns its status once it serves."""
    paths = EnginePaths.of_home()
    with _starting(paths, timeout_s):
        running = engine_status(paths)
        if running["running"]:
            raise EngineRunningError(f"the engine already runs (pid {running['pid']}, master {running['master']})")
        return _spawn(paths, settings, timeout_s)


def ensure_started(settings: EngineSettings, timeout_s: float = 300.0,
                   say: Callable[[str], None] | None = None) -> tuple[EngineStatus, bool]:
    """The running engine, or one started now (True). Two commands that both find none end
    with one engine: the second waits for the first's start, then uses its engine. `say`:
    what the start is doing."""
    paths = EnginePaths.of_home()
    running = engine_status(paths)
    if running["running"]:
        return running, False
    with _starting(paths, timeout_s):
        running = engine_status(paths)
        if running["running"]:
            return running, False
        return _spawn(paths, settings, timeout_s, say), True


@contextmanager
def _starting(paths: EnginePaths, timeout_s: float) -> Iterator[None]:
    """Held while an engine is being started for this home: one start at a time (a lock, not a sleep)."""
    private_dir(paths.root)
    fd = os.open(paths.start_lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EngineError(f"another command has been starting the engine for {timeout_s:.0f}s; "
                                      f"its log: {paths.log}") from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)


def _spawn(paths: EnginePaths, settings: EngineSettings, timeout_s: float,
           say: Callable[[str], None] | None = None) -> EngineStatus:
    # the engine takes Kafka settings from each call, never from its own environment
    env = {k: v for k, v in os.environ.items() if k != "KSTOOL_BOOTSTRAP_SERVERS"}
    with open(paths.log, "ab") as log:
        os.chmod(paths.log, 0o600)
        said = log.tell()  # its own lines from here on
        proc = subprocess.Popen([sys.executable, "-m", "kstool.engine.daemon.server", *settings.arguments()],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                start_new_session=True)  # a terminal's Ctrl-C is not for the engine
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EngineError(f"the engine exited (code {proc.returncode}) while starting: "
                              f"{_last_line(paths)}; its log: {paths.log}")
        if say is not None:
            said = _relay_start_lines(paths, said, say)
        running = engine_status(paths)
        if running["running"]:
            return running
        time.sleep(0.1)
    proc.terminate()
    raise EngineError(f"the engine did not start within {timeout_s:.0f}s; its log: {paths.log}")


def _relay_start_lines(paths: EnginePaths, offset: int, say: Callable[[str], None]) -> int:
    """The engine's log lines since `offset` that say what its start is doing, said; the new offset."""
    with open(paths.log, "rb") as log:
        log.seek(offset)
        text = log.read()
    whole = text[:text.rfind(b"\n") + 1]  # a line still being written waits for the next look
    for line in whole.decode("utf-8", "replace").splitlines():
        if STARTING in line:
            say(line.split(STARTING, 1)[1])
    return offset + len(whole)


def stop_engine(timeout_s: float = 600.0) -> EngineStatus:
    """Stop the engine after its hosted runs finish their current batch; returns its last status."""
    paths = EnginePaths.of_home()
    try:
        last = cast(EngineStatus, _ask(paths, "shutdown", 30.0))
    except EngineNotRunningError:
        return EngineStatus(running=False)
    deadline = time.monotonic() + timeout_s
    while pid_alive(last["pid"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    if pid_alive(last["pid"]):
        raise EngineError(f"the engine (pid {last['pid']}) did not stop within {timeout_s:.0f}s")
    return last


def _last_line(paths: EnginePaths) -> str:
    try:
        lines = [line for line in paths.log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["no log"])[-1].strip()


def engine_wanted(use_engine: bool = True) -> bool:
    """Whether a command may use (and start) the engine: not with --no-engine or KSTOOL_ENGINE=off."""
    return use_engine and os.environ.get(ENGINE_ENV, "on").lower() not in ("off", "0", "false", "no")


def run_here_or_in_engine(fn: Callable[..., Any], clients: KafkaClients | None, *args: Any, name: str, spark: SparkOptions | None,
                          progress: Progress, use_engine: bool = True) -> Any:
    """fn(clients, *args, progress, placement=...): in this home's engine, started now when none
    runs, unless the engine is not wanted or cannot host it (other Spark settings, another kstool);
    then in this process (HERE), saying why when an engine was there to use."""
    if engine_wanted(use_engine):
        hosted, outcome = _in_engine(fn, clients, args, name, spark, progress)
        if hosted:
            return outcome
        if outcome:
            progress.message(f"running without the engine: {outcome}")
    return fn(clients, *args, progress, placement=HERE)


def _in_engine(fn: Callable[..., Any], clients: KafkaClients | None, args: tuple[Any, ...], name: str, spark: SparkOptions | None,
               progress: Progress) -> tuple[bool, Any]:
    """(True, fn's result) from the engine; or (False, why not, or None when no engine was asked)."""
    paths = EnginePaths.of_home()
    own_spark = needs_own_spark(spark)
    if own_spark is not None:
        return False, own_spark if paths.socket.exists() else None
    try:
        sock = connect(paths)
    except EngineNotRunningError:
        began = time.monotonic()
        try:
            settings = EngineSettings.from_env(spark.master if spark else SparkOptions.master)
            _, started = ensure_started(settings, say=progress.message)
            sock = connect(paths)
        except EngineError as exc:
            return False, str(exc)
        if started:  # its start is part of this command's time: say how much, apart from the run's own
            progress.message(f"started the warm engine in {time.monotonic() - began:.1f}s for later runs (stops "
                             f"after {settings.idle_text()} idle, or with `kstool engine stop`)")
    with sock:
        return _call(sock, paths, fn, clients, args, name, spark, progress)


def _call(sock: socket.socket, paths: EnginePaths, fn: Callable[..., Any], clients: KafkaClients | None, args: tuple[Any, ...], name: str,
          spark: SparkOptions | None, progress: Progress) -> tuple[bool, Any]:
    send(sock, {"op": "call", "fn": fn, "args": args, "config": clients and clients.config, "name": name, "spark": spark,
                "client_pid": os.getpid(), "version": __version__, "prefix": sys.prefix})
    accepted = False
    with _ForwardedStopSignals(sock):
        while True:
            try:
                message = receive(sock)
            except (EOFError, OSError):
                if not accepted:  # it went away before taking the call (an idle engine stopping): nothing ran
                    return False, "the engine stopped before it took the call"
                progress.close()
                raise EngineLostError(f"the engine stopped while running {name}; its log: {paths.log} "
                                      f"(the checkpoint keeps what was committed: run again)") from None
            kind = message[0]
            if kind == "accepted":
                accepted = True
            elif kind == "progress":
                getattr(progress, message[1])(*message[2])
            elif kind == "result":
                return True, message[1]
            elif kind == "stopped":
                progress.close()
                raise EngineStoppedRunError(
                    f"{name} stopped after its current batch because the warm engine hosting it was stopped "
                    f"(`kstool engine stop`); the same command goes on from there")
            elif kind == "refused":
                return False, message[1]
            elif kind == "error":
                raise message[1]


class _ForwardedStopSignals:
    """Ctrl-C or SIGTERM to the client asks the hosted run to stop after its batch, as it would
    a run of the client's own."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.previous: dict[int, Any] = {}

    def _request_stop(self, signum: int, _frame: Any) -> None:
        note_stop_signal(signum)
        try:
            send(self.sock, "stop")
        except OSError:
            pass

    def __enter__(self) -> _ForwardedStopSignals:
        if threading.current_thread() is threading.main_thread():
            self.previous = {sig: signal.signal(sig, self._request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
