"""The engine's wire format and where it lives. A frame is a 4-byte big-endian length and a
pickle: client and engine are the same kstool in the same Python environment (checked on each
call), and the socket admits only its owner (0600 in a 0700 directory)."""

from __future__ import annotations

import pickle
import socket
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kstool.home import kstool_home

_LENGTH = struct.Struct(">I")
# AF_UNIX addresses are at most 107 bytes on Linux
MAX_SOCKET_PATH = 107


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
