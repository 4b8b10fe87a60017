"""The engine's wire format and where it lives. A frame is a 4-byte big-endian length and a
pickle: client and engine are the same kstool in the same Python environment (checked on each
call), and the socket admits only its owner (0600 in a 0700 directory)."""

from __future__ import annotations

import os
import pickle
import re
import socket
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kstool.base.errors import UsageError
from kstool.base.home import kstool_home
from kstool.base.timeutil import format_duration, parse_duration
from kstool.engine.daemon.exceptions import EngineNotRunningError
from kstool.engine.spark.session import SparkOptions

_LENGTH = struct.Struct(">I")
# AF_UNIX addresses are at most 107 bytes on Linux
MAX_SOCKET_PATH = 107
ENGINE_ENV = "KSTOOL_ENGINE"  # off: commands neither use nor start the engine
IDLE_ENV = "KSTOOL_ENGINE_IDLE"  # how long an engine with nothing to do stays; 0 = for ever
DEFAULT_IDLE_MS = 30 * 60_000
# parked queries an engine keeps (kstool.engine.query.parking); past it the least recently used is stopped
DEFAULT_MAX_PARKED = 8
STARTING = "while starting: "  # marks the engine's log lines that say what its start is doing (a client relays them)


def default_heap() -> str:
    """A quarter of the machine's memory, 1g to 4g: the engine keeps queries parked, and eight
    parked joins of 1M keys a table held ~1.3 GB of heap; with Spark's 1g the ninth such run
    failed (Java heap space). A JVM takes its heap as it needs it, not at start."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX system that tells
        return "1g"
    return f"{max(1, min(4, total // 4 // 2**30))}g"


# Spark refuses a driver whose heap is below 450 MiB (INVALID_DRIVER_MEMORY.SYSTEM_MEMORY); a JVM
# may see a little less heap than it was given
MIN_HEAP_MIB = 480
_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def checked_heap(size: str) -> str:
    """A heap size Spark's driver can start with. Spark's launcher passes it on as -Xmx<size>,
    so it takes the JVM's form (4g, 512m): a number alone would be bytes there."""
    found = re.fullmatch(r"(\d+)([kmgt])", size.strip().lower())
    if found is None:
        raise UsageError(f"--driver-memory {size!r}: not a size (e.g. 4g or 512m)")
    if int(found.group(1)) * _UNITS[found.group(2)] < MIN_HEAP_MIB << 20:
        raise UsageError(f"--driver-memory {size}: too small, Spark's driver needs at least {MIN_HEAP_MIB}m")
    return size.strip()


@dataclass(frozen=True)
class EngineSettings:
    """What an engine is started with (`kstool engine start`, or a command that starts one)."""

    master: str = SparkOptions.master
    idle_timeout_ms: int = DEFAULT_IDLE_MS
    driver_memory: str | None = None  # the JVM heap (Spark's spark.driver.memory); None: default_heap()
    max_parked: int = DEFAULT_MAX_PARKED

    @classmethod
    def from_env(cls, master: str = SparkOptions.master) -> "EngineSettings":
        return cls(master, idle_timeout_from_env())

    def arguments(self) -> list[str]:
        """The engine process's command line (kstool.engine.daemon.server)."""
        return ["--master", self.master, "--idle-timeout-ms", str(self.idle_timeout_ms),
                "--max-parked", str(self.max_parked), "--driver-memory", self.driver_memory or default_heap()]

    def idle_text(self) -> str:
        return str(format_duration(self.idle_timeout_ms)) if self.idle_timeout_ms else "never"


def parse_idle_timeout(text: str) -> int:
    """An idle timeout in ms: a duration, or 0 (never)."""
    return 0 if text.strip() == "0" else parse_duration(text)


def idle_timeout_from_env() -> int:
    text = os.environ.get(IDLE_ENV, "").strip()
    if not text:
        return DEFAULT_IDLE_MS
    try:
        return parse_idle_timeout(text)
    except UsageError as exc:
        raise UsageError(f"{IDLE_ENV}: {exc}") from None


def needs_own_spark(spark: SparkOptions | None) -> str | None:
    """Why a command's Spark settings need a Spark of its own, not the engine's, or None."""
    if spark is None:
        return None
    if spark.debug:
        return "--debug shows Spark's own log, which only a Spark of the command's own can"
    fixed = sorted(k for k in spark.conf if not k.startswith("spark.sql."))
    if fixed:
        return f"{', '.join(fixed)} can only be set when a Spark session starts"
    return None


@dataclass(frozen=True)
class EnginePaths:
    root: Path

    @classmethod
    def of_home(cls) -> "EnginePaths":
        return cls(kstool_home() / "engine")

    @property
    def socket(self) -> Path:
        return self.root / "engine.sock"

    @property
    def start_lock(self) -> Path:
        """Held by the command that is starting an engine for this home."""
        return self.root / "start.lock"

    @property
    def pid_file(self) -> Path:
        return self.root / "engine.pid"

    @property
    def lock(self) -> Path:
        return self.root / "engine.lock"

    @property
    def log(self) -> Path:
        return self.root / "engine.log"

    @property
    def spark_log(self) -> Path:
        return self.root / "spark.log"


NOT_RUNNING = "the engine is not running (kstool engine start)"


def connect(paths: EnginePaths) -> socket.socket:
    """A connection to the engine of this kstool home; EngineNotRunningError when none listens."""
    if not paths.socket.exists():
        raise EngineNotRunningError(NOT_RUNNING)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(paths.socket))
    except OSError:  # a socket left behind by an engine that was killed
        sock.close()
        raise EngineNotRunningError(NOT_RUNNING) from None
    return sock


def send(sock: socket.socket, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_LENGTH.pack(len(data)) + data)


def receive(sock: socket.socket) -> Any:
    """The next message, or EOFError when the other side has gone."""
    header = _exactly(sock, _LENGTH.size)
    return pickle.loads(_exactly(sock, _LENGTH.unpack(header)[0]))


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
