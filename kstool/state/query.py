"""State queries: which stores an app has, and get / range / all / count / fetch / changes
against either backend."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from kstool.application.model import AppPaths, Manifest, StoreSpec, existing_app, load_manifest
from kstool.base.errors import UsageError
from kstool.base.names import changelog_topic, detect_internal_topics, validate_name
from kstool.base.serdes import SCHEMA_FORMATS
from kstool.changelog.layouts import KeySpec
from kstool.changelog.operations import detect_formats, flag_formats, store_formats
from kstool.checkpoint.location import CheckpointFiles
from kstool.checkpoint.logs import committed_batches
from kstool.engine import SparkOptions, engine_wanted, open_app_checkpoint
from kstool.kafka.client import KafkaClients
from kstool.kafka.exceptions import AuthorizationError
from kstool.schemas.formats import SchemaOptions
from kstool.state.backend import Change, Entry, StateBackend
from kstool.state.changelog import ChangelogBackend, store_times
from kstool.state.exceptions import StoreNotFoundError, UnsupportedQueryError
from kstool.state.from_checkpoint import CheckpointBackend
from kstool.stores.state_layouts import STATE_LAYOUT_SHARDS


@dataclass
class StateSource:
    app_id: str | None
    state_dir: Path
    store: str | None = None
    from_changelog: bool = False
    changelog_topic: str | None = None  # Kafka Streams apps: no manifest
    key_format: str | None = None
    value_format: str | None = None
    window_size_ms: int | None = None  # with changelog_topic
    retention_ms: int | None = None  # with changelog_topic; None: from the topic's config
    batch_id: int | None = None
    spark: SparkOptions | None = None
    use_engine: bool = True  # checkpoint reads go to the warm engine, started when none runs
    schemas: SchemaOptions | None = None  # --changelog-topic with avro keys or values


def list_stores(state_dir: Path, app_id: str) -> list[dict]:
    paths = AppPaths(state_dir, validate_name(app_id))
    manifest = existing_app(paths, StoreNotFoundError)
    checkpoint = open_app_checkpoint(paths, manifest)
    batches = committed_batches(checkpoint)
    partitions = _state_partitions(checkpoint)
    return [{"store": s.name, "kind": s.kind, "spark_operator": s.operator_id, "spark_store": s.spark_store,
             "partitions": partitions, "key_format": s.key_format,
             "value_format": s.value_format, "first_batch": batches[0] if batches else None,
             "last_batch": batches[-1] if batches else None, "changelog_topic": s.changelog_topic}
            for s in manifest.stores]


def list_kafka_streams_stores(clients: KafkaClients, state_dir: Path, app_id: str) -> list[dict]:
    """A Kafka Streams app's stores, from its changelogs (`<application.id>-<store>-changelog`);
    what its checkpoint would say (operators, batches) it has none of."""
    topics = clients.metadata().topics
    found = [t for t in detect_internal_topics(app_id, list(topics), set()) if t.endswith("-changelog")]
    if not found:  # neither: the one error for an unknown app, naming the nearest
        existing_app(AppPaths(state_dir, validate_name(app_id)), StoreNotFoundError,
                     f" (nor a topic {app_id}-STORE-changelog of a Kafka Streams app)")
    return [{"store": t.removeprefix(f"{app_id}-").removesuffix("-changelog"), "kind": None, "spark_operator": None,
             "spark_store": None, "partitions": len(topics[t].partitions), "key_format": None, "value_format": None,
             "first_batch": None, "last_batch": None, "changelog_topic": t} for t in sorted(found)]


def _state_partitions(checkpoint: CheckpointFiles) -> int | None:
    return len([name for name in checkpoint.names("state/0") if name.isdigit()]) or None


def _store(state_dir: Path, app_id: str, name: str | None) -> tuple[Manifest, StoreSpec]:
    manifest = existing_app(AppPaths(state_dir, validate_name(app_id)), StoreNotFoundError,
                            " (for a Kafka Streams app give --changelog-topic with --key-format/--value-format)")
    for store in manifest.stores:
        if name is None or store.name == name:
            return manifest, store
    raise StoreNotFoundError(f"app {app_id!r} has no store {name!r} "
                             f"(stores: {', '.join(s.name for s in manifest.stores)})")


def is_kstool_app(source: StateSource) -> bool:
    """The --app-id has a kstool manifest (else it may be a Kafka Streams app's application.id)."""
    return source.app_id is not None and load_manifest(AppPaths(source.state_dir, validate_name(source.app_id))) is not None


def kafka_streams_changelog(clients: KafkaClients, app_id: str, store: str | None) -> str | None:
    """The changelog of a Kafka Streams app's store, by Kafka Streams' naming rule
    (`<application.id>-<store>-changelog`): the one of --store, or the app's only one (None:
    the app has none; several and no --store: a usage error naming them)."""
    topics = clients.metadata().topics
    if store is not None:
        return changelog_topic(app_id, store) if changelog_topic(app_id, store) in topics else None
    found = sorted(t for t in detect_internal_topics(app_id, list(topics), set()) if t.endswith("-changelog"))
    if len(found) > 1:
        names = ", ".join(t.removeprefix(f"{app_id}-").removesuffix("-changelog") for t in found)
        raise UsageError(f"Kafka Streams app {app_id!r} has stores {names}: give --store")
    return found[0] if found else None


def _online(clients: KafkaClients | None) -> KafkaClients:
    if clients is None:
        raise UsageError("reading a changelog needs the broker")
    return clients


def open_backend(clients: KafkaClients | None, source: StateSource) -> tuple[StateBackend, StoreSpec | None]:
    if source.changelog_topic:
        online = _online(clients)
        online.require_topics([source.changelog_topic])  # a typo: "topic 'x' does not exist", nothing read
        formats = (flag_formats(source.key_format, source.value_format, source.schemas)
                   if source.key_format or source.value_format else detect_formats(online, source.changelog_topic))
        windowed = formats.key.layout in ("window", "session")
        warnings = []
        try:
            retention, history = store_times(online, source.changelog_topic)
        except AuthorizationError as refused:  # the records may still be read: say what is not known
            retention = history = None
            warnings.append(f"{refused}: the store's retention (give --retention) and whether it is a "
                            "versioned store are unknown; entries are shown as the changelog holds them")
        changelog = ChangelogBackend(online, source.changelog_topic, formats, source.window_size_ms,
                                     history_ms=None if windowed else history,
                                     retention_ms=source.retention_ms if source.retention_ms is not None
                                     else retention if windowed else None)
        changelog.warnings = warnings
        return changelog, None
    if not source.app_id:
        raise UsageError("give --app-id (or --changelog-topic for a Kafka Streams app)")
    if not is_kstool_app(source) and clients is not None:
        topic = kafka_streams_changelog(clients, source.app_id, source.store)
        if topic is not None:  # a Kafka Streams app: its store's changelog by its naming rule
            return open_backend(clients, dataclasses.replace(source, app_id=None, changelog_topic=topic))
    manifest, store = _store(source.state_dir, source.app_id, source.store)
    if source.from_changelog:
        if source.batch_id is not None:
            raise UnsupportedQueryError("--batch-id reads the checkpoint; drop --from-changelog")
        return ChangelogBackend(_online(clients), store.changelog_topic, store_formats(store), store.window_size_ms,
                                store.history_ms), store
    if engine_wanted(source.use_engine):  # opened where the read runs: the checkpoint is read once
        return HostedBackend(clients, source), store
    return _checkpoint_backend(source, manifest, store), store


def _checkpoint_backend(source: StateSource, manifest: Manifest, store: StoreSpec) -> CheckpointBackend:
    checkpoint = open_app_checkpoint(AppPaths(source.state_dir, cast(str, source.app_id)), manifest)
    return CheckpointBackend(cast(str, source.app_id), checkpoint, store, source.spark or SparkOptions(master="local[1]"),
                             source.batch_id, sharded=manifest.state_layout >= STATE_LAYOUT_SHARDS)


# the reads of a store, as values that cross to the warm engine (pickled) and run there
@dataclass(frozen=True)
class Entries:
    def __call__(self, backend: StateBackend) -> list[Entry]:
        return backend.entries()


@dataclass(frozen=True)
class Lookup:
    keys: list[Any]

    def __call__(self, backend: StateBackend) -> list[Entry]:
        return backend.lookup(self.keys)


@dataclass(frozen=True)
class Changes:
    from_batch: int
    to_batch: int | None

    def __call__(self, backend: StateBackend) -> list[Change]:
        return backend.changes(self.from_batch, self.to_batch)


def read_checkpoint(clients: KafkaClients | None, source: StateSource, read: Entries | Lookup | Changes,
                    progress: object = None, placement: object = None) -> list[Entry] | list[Change]:
    """One read of a checkpoint-backed store, where it runs (the warm engine, or this process:
    the same read in either place; it takes no lock, so `placement` is not needed)."""
    manifest, store = _store(source.state_dir, cast(str, source.app_id), source.store)
    return read(_checkpoint_backend(source, manifest, store))


class HostedBackend:
    """A checkpoint-backed store read in the warm engine (kstool.engine.daemon; started when
    none runs), else in this process: the same reads, without starting Spark here."""

    def __init__(self, clients: KafkaClients | None, source: StateSource):
        self.clients, self.source = clients, source

    def _read(self, read: Entries | Lookup | Changes) -> Any:
        from kstool.engine import Silent, run_here_or_in_engine

        return run_here_or_in_engine(read_checkpoint, self.clients, self.source, read,
                                     name=f"state of {self.source.app_id}", spark=None, progress=Silent())

    def entries(self) -> list[Entry]:
        return cast("list[Entry]", self._read(Entries()))

    def lookup(self, keys: list[Any]) -> list[Entry]:
        return cast("list[Entry]", self._read(Lookup(keys)))

    def changes(self, from_batch: int, to_batch: int | None) -> list[Change]:
        return cast("list[Change]", self._read(Changes(from_batch, to_batch)))


def typed_key(text: str, source: StateSource, store: StoreSpec | None) -> Any:
    """A key typed on the command line, as the store holds it: by the manifest's key format, or
    the --key-format given with --changelog-topic (text without either)."""
    if store is not None:
        return coerce_key(text, store.key_format)
    return coerce_key(text, KeySpec.parse(source.key_format).key_format if source.key_format else None)


def coerce_key(text: str, key_format: str | None) -> Any:
    """A key typed on the command line, as the store holds it."""
    if key_format in ("long", "int"):
        try:
            return int(text)
        except ValueError:
            raise UsageError(f"the store's keys are {key_format}s; {text!r} is not one") from None
    if key_format == "double":
        try:
            return float(text)
        except ValueError:
            raise UsageError(f"the store's keys are doubles; {text!r} is not one") from None
    if key_format in SCHEMA_FORMATS:
        try:
            return json.loads(text)
        except ValueError:
            raise UsageError(f"the store's keys are {key_format} records: give them as JSON, not {text!r}") from None
    return text


def key_range(entries: list[Entry], low: Any, high: Any) -> list[Entry]:
    return [e for e in entries if (low is None or e.key >= low) and (high is None or e.key <= high)]


def fetch(entries: list[Entry], key: Any, time_from: int | None, time_to: int | None, kind: str) -> list[Entry]:
    """Window stores: windows of KEY starting within [from, to]; session stores: sessions of
    KEY that end at or after `from` and start at or before `to` (findSessions)."""
    if kind == "key-value":
        raise UnsupportedQueryError("fetch is for window and session stores; use get")
    out = []
    for e in entries:
        if e.key != key:
            continue
        start, end = e.window_start or 0, e.window_end or 0  # set for window and session entries
        if kind == "window" and (time_from is None or start >= time_from) and (time_to is None or start <= time_to):
            out.append(e)
        if kind == "session" and (time_from is None or end >= time_from) and (time_to is None or start <= time_to):
            out.append(e)
    return out
