"""The connection profile the embedded broker writes: the client settings that broker needs.

Kept out of product code paths: clients pick these settings up only when they talk to the
address in the profile, so nothing else branches on which broker is on the other end.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kstool.base.home import kstool_home, read_json, write_private_json

# The embedded broker answers a wrong high watermark for multi-record batches and joins
# subscribe() members only after half the session timeout (shared notes, embedded-broker.md).
EMBEDDED_PRODUCER_SETTINGS = {"batch.num.messages": "1", "linger.ms": "0"}
EMBEDDED_CONSUMER_SETTINGS = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}


@dataclass
class Profile:
    name: str
    bootstrap_servers: str
    pid: int
    port: int
    common: dict[str, str] = field(default_factory=dict)
    producer: dict[str, str] = field(default_factory=dict)
    consumer: dict[str, str] = field(default_factory=dict)
    # bulk writers may batch if each partition's last batch holds one record (kstool.kafka.bulk)
    single_record_tail: bool = False


def broker_dir() -> Path:
    return kstool_home() / "broker"


def profile_path() -> Path:
    return broker_dir() / "profile.json"


def save_profile(profile: Profile) -> None:
    write_private_json(profile_path(), asdict(profile))


def load_profile() -> Profile | None:
    data = read_json(profile_path())
    if not isinstance(data, dict):
        return None
    try:
        return Profile(**data)
    except TypeError:
        return None


def pid_alive(pid: int) -> bool:
    try:  # reap it first if it is our own exited child, or kill(0) would see a zombie
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Exited, waiting for its parent to reap it (e.g. an engine started by a long-lived process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def load_running_profile() -> Profile | None:
    """The profile of an embedded broker that is still running, else None."""
    profile = load_profile()
    if profile is None or not pid_alive(profile.pid):
        return None
    return profile
