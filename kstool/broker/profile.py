"""The connection profile the embedded broker writes: the client settings that broker needs.

Kept out of product code paths: clients pick these settings up only when they talk to the
address in the profile, so nothing else branches on which broker is on the other end.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from kstool.base.home import kstool_home, read_json, write_private_json
from kstool.base.processes import still_running

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
    # kept after `broker stop`: commands given no address then say the broker is stopped instead
    # of trying a default where another broker may listen
    stopped: bool = False
    # the broker's start time (kstool.base.processes.start_time): a later process given its pid is not it
    started: str | None = None


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


def load_running_profile() -> Profile | None:
    """The profile of an embedded broker that is still running, else None."""
    profile = load_profile()
    if profile is None or profile.stopped or not still_running(profile.pid, profile.started):
        return None
    return profile


def mark_stopped(profile: Profile) -> None:
    profile.stopped = True
    save_profile(profile)
