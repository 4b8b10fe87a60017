"""An application's home on disk: its manifest (app.json), its run lock and its Spark
checkpoint. Layout: <state-dir>/<app-id>/{app.json, checkpoint/, run.lock, spark.log,
metrics.jsonl}; the checkpoint may live elsewhere instead (the manifest's checkpoint_location,
any Hadoop URI)."""

from __future__ import annotations

import fcntl
import os
import shutil
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from kstool import __version__
from kstool.application.exceptions import AppBusyError, IncompatibleRunError
from kstool.base.documents import RunningPids
from kstool.base.errors import KstoolError, NotFoundError
from kstool.base.home import kstool_home, private_dir, read_json, write_private_json
from kstool.base.names import did_you_mean, validate_name
from kstool.stores import STORE_KINDS, VERSIONED_STORE, StoreKind
from kstool.stores.state_layouts import STATE_LAYOUT_ENTRIES

MANIFEST = "app.json"
# batches of history a checkpoint keeps (Spark's minBatchesToRetain: offsets, commits and state
# versions), so that `reprocess` can roll an app back and `state --batch-id` can look back
DEFAULT_HISTORY_BATCHES = 1000


def default_state_dir() -> Path:
    return kstool_home() / "apps"


def resolve_state_dir(given: str | Path | None) -> Path:
    """--state-dir as given (~ expanded), else the default under the kstool home."""
    return Path(given).expanduser() if given else default_state_dir()


@dataclass(frozen=True)
class AppPaths:
    state_dir: Path
    app_id: str

    @property
    def root(self) -> Path:
        return self.state_dir / validate_name(self.app_id)

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST

    @property
    def default_checkpoint(self) -> Path:
        return self.root / "checkpoint"

    @property
    def lock(self) -> Path:
        return self.root / "run.lock"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def spark_log(self) -> Path:
        return self.root / "spark.log"

    @property
    def client_config(self) -> Path:
        """The client settings for this run's executors (may hold secrets; 0600, run only)."""
        return self.root / "client.json"

    @property
    def gate(self) -> Path:
        """What the engine's parked query of the app may read (kstool.engine.query.parking)."""
        return self.root / "gate.json"


@dataclass
class StoreSpec:
    name: str
    kind: str  # key-value | window | session
    changelog_topic: str
    key_format: str
    value_format: str
    operator_id: int = 0
    spark_store: str = "default"
    # where the store's key and value sit in Spark's state rows (key.<field>, value.<field>);
    # empty: the key struct's only field and the value struct's first field
    spark_key_field: str = ""
    spark_value_field: str = ""
    # stores kept by a transformWithState processor: the state variable holding them (a map
    # from the changelog key bytes to the value)
    spark_state_var: str = ""
    retention_ms: int | None = None  # window and session stores
    window_size_ms: int | None = None  # window stores: their keys hold only the start
    # versioned key-value stores: how long they keep older versions; their changelog is their
    # history (a restore replays it whole) and compaction waits that long plus a day
    history_ms: int | None = None

    @property
    def store_kind(self) -> StoreKind:
        """What the store is (kstool.stores): its key layout, its changelog's configs, its restore."""
        return VERSIONED_STORE if self.history_ms is not None else STORE_KINDS[self.kind]


@dataclass
class Manifest:
    app_id: str
    topology: str
    parameters: dict[str, Any]
    input_topics: list[str]
    output_topics: list[str]
    stores: list[StoreSpec] = field(default_factory=list)
    kstool_version: str = __version__
    checkpoint_location: str | None = None  # a URI; None: the app folder's checkpoint/
    # per-task stores logged to their task's changelog partition (apps created by kstool >= 0.2;
    # older ones keep partitioning by key, so their compacted changelogs stay whole)
    changelog_by_task: bool = False
    restore_pending: bool = False  # `state restore`: the next run's first batch seeds the stores
    # where the checkpoint's first batch started, "topic:partition" -> offset, when its state
    # started empty there (None: unknown, or seeded by a restore); the state before batch 0
    origin: dict[str, int] | None = None
    history_batches: int = DEFAULT_HISTORY_BATCHES
    # the last run's options, as the command line gave them (on_error, late_topic,
    # processing_guarantee, on_data_loss, ...): what `reprocess` runs the app with
    run_settings: dict[str, Any] = field(default_factory=dict)
    state_layout: int = STATE_LAYOUT_ENTRIES  # a manifest without it is older than the shards
    # Spark's aggregations (wordcount, aggregate) keep each group's last headers in their state
    # (apps created since they do): an older app's state has no place for them, and Spark
    # refuses a state of another schema
    aggregate_headers: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Manifest":
        stores = [StoreSpec(**s) for s in data.get("stores", [])]
        return cls(**{**data, "stores": stores})


def origin_document(offsets: dict[tuple[str, int], int]) -> dict[str, int]:
    """Offsets as the manifest keeps them ("topic:partition" -> offset)."""
    return {f"{t}:{p}": o for (t, p), o in sorted(offsets.items())}


def origin_offsets(document: dict[str, int]) -> dict[tuple[str, int], int]:
    return {(key.rpartition(":")[0], int(key.rpartition(":")[2])): o for key, o in document.items()}


def load_manifest(paths: AppPaths) -> Manifest | None:
    data = read_json(paths.manifest)
    return Manifest.from_dict(data) if isinstance(data, dict) else None


def existing_app(paths: AppPaths, error: type[KstoolError] = NotFoundError, hint: str = "") -> Manifest:
    """The app's manifest; else the one error every command gives for an unknown app id, naming
    the nearest app when one is close (a typo at 3 a.m.)."""
    manifest = load_manifest(paths)
    if manifest is not None:
        return manifest
    suggestion = did_you_mean(paths.app_id, app_ids(paths.state_dir))
    raise error(f"no kstool app {paths.app_id!r} in {paths.state_dir}{suggestion}{hint}")


def app_ids(state_dir: Path) -> list[str]:
    """The ids of the apps with a manifest in `state_dir`."""
    return [f.name for f in state_dir.iterdir() if (f / MANIFEST).is_file()] if state_dir.is_dir() else []


def checkpoint_uri(paths: AppPaths, location: str | None) -> str:
    """A manifest's checkpoint_location, or the app folder's checkpoint, as a URI."""
    return location or paths.default_checkpoint.absolute().as_uri()


def iter_apps(state_dir: Path) -> Iterator[tuple[AppPaths, Manifest]]:
    """Every kstool app in a state dir (folders holding a manifest), by name."""
    if not state_dir.is_dir():
        return
    for folder in sorted(state_dir.iterdir()):
        if (folder / MANIFEST).is_file():
            paths = AppPaths(state_dir, folder.name)
            manifest = load_manifest(paths)
            if manifest is not None:
                yield paths, manifest


def check_compatible(existing: Manifest, wanted: Manifest) -> None:
    """Refuse a run that would reuse state built from other inputs or another topology."""
    if existing.topology != wanted.topology:  # its settings are another topology's: not changes of these
        raise IncompatibleRunError(
            f"app {existing.app_id!r} runs topology {existing.topology}, not {wanted.topology}; "
            f"use another --app-id, or `kstool reset --app-id {existing.app_id}` to start over")
    problems = []
    if sorted(existing.input_topics) != sorted(wanted.input_topics):
        problems.append(f"input topics {existing.input_topics} -> {wanted.input_topics}")
    if sorted(existing.output_topics) != sorted(wanted.output_topics):
        problems.append(f"output topics {existing.output_topics} -> {wanted.output_topics}")
    for key in sorted(set(existing.parameters) | set(wanted.parameters)):
        if existing.parameters.get(key) != wanted.parameters.get(key):
            problems.append(f"{key} {existing.parameters.get(key)!r} -> {wanted.parameters.get(key)!r}")
    if problems:
        raise IncompatibleRunError(
            f"app {existing.app_id!r} was created with other settings ({'; '.join(problems)}); "
            f"use another --app-id, or `kstool reset --app-id {existing.app_id}` to start over")


def save_manifest(paths: AppPaths, manifest: Manifest) -> None:
    write_private_json(paths.manifest, manifest.to_dict())


# What the holder of an app's lock does with it: the warm engine frees the query it keeps parked
# for the app accordingly (kstool.engine.daemon.app_use): RUN stops it, RUN_PARKED leaves it to
# the run (which resumes or replaces it in the engine), REWRITE stops every parked query and
# closes the state stores Spark keeps loaded, before the checkpoint is deleted or rolled back.
RUN, RUN_PARKED, REWRITE = "run", "run-parked", "rewrite"


@dataclass(frozen=True)
class LockHolder:
    """Who runs an app: the command's process, and the warm engine's when it hosts the run
    (killing the engine stops every app in it, so it is not shown as the app's)."""

    pid: int
    engine_pid: int | None = None

    def __str__(self) -> str:
        return f"pid {self.pid}" + (f", in the warm engine, pid {self.engine_pid}" if self.engine_pid else "")

    def encode(self) -> bytes:
        return f"{self.pid} {self.engine_pid or ''}".strip().encode()

    @classmethod
    def decode(cls, data: bytes) -> "LockHolder":
        fields = [int(f) for f in data.decode(errors="replace").split() if f.isdigit()]
        return cls(fields[0], fields[1] if len(fields) > 1 else None) if fields else cls(-1)


def running_pids(holder: LockHolder | None) -> RunningPids:
    """The JSON fields that say who runs an app."""
    return {"running_pid": holder.pid if holder else None, "engine_pid": holder.engine_pid if holder else None}


# set by the warm engine around a run it hosts for a client (kstool.engine.daemon.server)
_hosted_for: ContextVar[int | None] = ContextVar("kstool_hosted_for", default=None)


@contextmanager
def hosted_for(client_pid: int) -> Iterator[None]:
    """Locks taken inside this block name the client as the app's process, the engine beside it."""
    token = _hosted_for.set(client_pid)
    try:
        yield
    finally:
        _hosted_for.reset(token)


def _this_holder() -> LockHolder:
    client = _hosted_for.get()
    return LockHolder(os.getpid()) if client is None else LockHolder(client, os.getpid())


class AppLock:
    """One run per app at a time: a second run fails at once (cron must not pile up)."""

    def __init__(self, paths: AppPaths, use: str = RUN, *, on_taken: Callable[[AppPaths, str], None] | None):
        """on_taken is called holding the lock: the engine's (kstool.engine.hooks.lock_app binds
        it) frees the app's parked query."""
        self.paths, self.use, self.on_taken = paths, use, on_taken
        self._fd: int | None = None
        self._new_app = False  # its folder made by this lock: removed again if the run never started

    def __enter__(self) -> "AppLock":
        self._new_app = not self.paths.root.exists()
        private_dir(self.paths.root)
        fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = LockHolder.decode(os.read(fd, 64))
            os.close(fd)
            raise AppBusyError(f"app {self.paths.app_id!r} is already running ({holder})") from None
        os.ftruncate(fd, 0)
        os.write(fd, _this_holder().encode())
        self._fd = fd
        if self.on_taken is not None:
            try:
                self.on_taken(self.paths, self.use)
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            if self._new_app:
                _remove_if_never_started(self.paths)
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _remove_if_never_started(paths: AppPaths) -> None:
    """A new app whose first run failed before it was set up (a missing input, say) leaves no
    folder behind: nothing in it but the lock and empty folders, no manifest."""
    files = [f for f in paths.root.rglob("*") if not f.is_dir()]
    if files == [paths.lock]:
        shutil.rmtree(paths.root, ignore_errors=True)


def stopped_app(paths: AppPaths, before: str) -> Manifest:
    """The manifest of an app that is not running, for an operation that changes it ("a restore")."""
    manifest = existing_app(paths)
    refuse_if_running(paths, before)
    return manifest


def refuse_if_running(paths: AppPaths, before: str) -> None:
    holder = lock_holder(paths)
    if holder is not None:
        raise AppBusyError(f"app {paths.app_id!r} is running ({holder}); stop it before {before}")


def lock_holder(paths: AppPaths) -> LockHolder | None:
    """Who holds the app's run lock, or None when the app is not running."""
    if not paths.lock.exists():
        return None
    fd = os.open(paths.lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except BlockingIOError:
        return LockHolder.decode(os.read(fd, 64))
    finally:
        os.close(fd)
