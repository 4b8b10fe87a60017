"""kstool state stores|get|range|all|count|fetch|changes: query an app's state stores;
kstool state restore: rebuild them from their changelogs."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Callable, cast

import click

from kstool.application.model import StoreSpec
from kstool.base.errors import UsageError
from kstool.base.timeutil import format_duration
from kstool.commands.completion import complete_apps
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import (
    DURATION,
    STORE_FORMATS,
    TIME,
    F,
    SchemaFlags,
    confirm_or_refuse,
    gathered,
    output_option,
    schema_options,
    state_dir_option,
)
from kstool.engine import SparkOptions
from kstool.output import Column, Listing, emit, info, warn
from kstool.state import query as ops
from kstool.state.backend import Entry, StateBackend
from kstool.state.changelog import ChangelogBackend
from kstool.state.exceptions import KeyNotFoundError

ENTRY_COLUMNS = [Column("key"), Column("value"), Column("window_start", kind="time"),
                 Column("window_end", kind="time"), Column("partition", justify="right")]


_SOURCE_OPTIONS = [
    click.option("--app-id", help="The kstool app whose store to read.", shell_complete=complete_apps),
    click.option("--store", help="Store name [default: the app's first store]."),
    state_dir_option(),
    click.option("--from-changelog", is_flag=True,
                 help="Rebuild the store from its changelog topic (no Spark; fast)."),
    click.option("--changelog-topic", metavar="TOPIC",
                 help="Read this changelog (Kafka Streams apps; with --key-format/--value-format)."),
    click.option("--key-format", metavar="FMT|windowed:FMT|session:FMT", help="With --changelog-topic."),
    click.option("--value-format", type=STORE_FORMATS, help="With --changelog-topic."),
    click.option("--window-size", "window_size_ms", type=DURATION, metavar="DURATION",
                 help="With --changelog-topic: a window store's window size, for the windows' ends "
                      "(its keys hold only the start)."),
    click.option("--retention", "retention_ms", type=DURATION, metavar="DURATION",
                 help="With --changelog-topic: a window or session store's retention; older windows are "
                      "gone from the store [default: the topic's retention.ms less Kafka Streams' extra day]."),
    click.option("--no-engine", "use_engine", flag_value=False, default=True,
                 help="Read the checkpoint in this process: neither use the warm engine nor start one "
                      "(also KSTOOL_ENGINE=off)."),
]
_BATCH_OPTION = click.option("--batch-id", type=click.IntRange(min=0),
                             help="The store as of this committed batch (checkpoint only).")


def source_options(with_batch: bool = True) -> Callable[[F], F]:
    """The store to read, as one StateSource (schema flags included, for avro changelogs)."""
    gather = gathered("source", ops.StateSource, *_SOURCE_OPTIONS, *([_BATCH_OPTION] if with_batch else []))

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def with_schemas(*args: Any, source: ops.StateSource, schema_flags: SchemaFlags, **kwargs: Any) -> Any:
            configured = click.get_current_context().ensure_object(Globals).client_config().schema_registry
            return func(*args, source=dataclasses.replace(source, schemas=schema_flags.options(configured)),
                        **kwargs)
        return cast(F, gather(schema_options()(with_schemas)))
    return decorate


def _open(g: Globals, source: ops.StateSource) -> tuple[StateBackend, StoreSpec | None]:
    source = dataclasses.replace(source, spark=SparkOptions(master="local[1]", debug=g.debug))
    needs_kafka = source.from_changelog or source.changelog_topic or not ops.is_kstool_app(source)
    backend, store = ops.open_backend(g.clients() if needs_kafka else None, source)
    if isinstance(backend, ChangelogBackend):
        for warning in backend.warnings:
            warn(warning)
    return backend, store


def _emit(entries: Iterable[Entry], output: str) -> None:
    emit(Listing([e.to_dict() for e in entries], ENTRY_COLUMNS), output)


@click.group()
def state() -> None:
    """Query state stores from outside the app (read-only; safe while it runs), or restore
    them from their changelogs."""


@state.command()
@click.option("--app-id", required=True, shell_complete=complete_apps)
@state_dir_option()
@click.option("--dry-run", is_flag=True, help="Show the plan; change nothing.")
@click.option("--yes", is_flag=True, help="Replace the checkpoint without asking (scripts).")
@output_option()
@pass_globals
def restore(g: Globals, app_id: str, state_dir: Path, dry_run: bool, yes: bool, output: str) -> None:
    """Rebuild APP's state from its changelog topics (after its checkpoint's state was lost):
    replaces the checkpoint; the next run seeds the stores, then goes on from the group's offsets."""
    from kstool.state.restore import apply_restore, plan_restore

    plan = plan_restore(g.clients(), state_dir, app_id)
    emit(Listing(plan.changelogs, [Column("store"), Column("topic"), Column("partitions", justify="right"),
                                   Column("entries", justify="right")],
                 document={**plan.to_dict(), "dry_run": dry_run},
                 title=f"restore {app_id} ({plan.topology}) from its changelogs; replaces {plan.checkpoint} "
                       f"({plan.committed_batches} committed batch(es))"), output)
    for warning in plan.warnings:
        warn(warning)
    if dry_run:
        info("dry run: nothing was changed")
        return
    confirm_or_refuse(f"Replace the checkpoint of {app_id}?", yes)
    apply_restore(plan, state_dir)
    info(f"{app_id}: checkpoint replaced; the next `kstool run` restores the stores from the changelogs")


@state.command()
@click.option("--app-id", required=True, shell_complete=complete_apps)
@state_dir_option()
@output_option()
@pass_globals
def stores(g: Globals, app_id: str, state_dir: Path, output: str) -> None:
    """The app's stores: kind, Spark operator and store, partitions, formats, batches, changelog
    (a Kafka Streams app's: its changelog topics)."""
    if ops.is_kstool_app(ops.StateSource(app_id, state_dir)):
        rows = ops.list_stores(state_dir, app_id)
    else:
        rows = ops.list_kafka_streams_stores(g.clients(), state_dir, app_id)
    emit(Listing(rows, [Column("store"), Column("kind"), Column("spark_operator", "OPERATOR"),
                        Column("partitions", justify="right"), Column("key_format"), Column("value_format"),
                        Column("first_batch", justify="right"), Column("last_batch", justify="right"),
                        Column("changelog_topic")]), output)


@state.command()
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@source_options()
@output_option()
@pass_globals
def get(g: Globals, keys: tuple[str, ...], output: str, source: ops.StateSource) -> None:
    """Values of KEY...; a missing key prints "not found" and exits 1."""
    backend, store = _open(g, source)
    wanted = [ops.typed_key(k, source, store) for k in keys]
    found = backend.lookup(wanted)
    if found or output != "table":  # a table of nothing would only be a header above the error
        _emit(found, output)
    found_keys = [e.key for e in found]  # a list: avro keys are dicts
    missing = [text for text, k in zip(keys, wanted) if k not in found_keys]
    if missing:
        raise KeyNotFoundError(f"not found: {', '.join(missing)}")


@state.command("range")
@click.option("--from", "low", metavar="KEY", help="First key (inclusive).")
@click.option("--to", "high", metavar="KEY", help="Last key (inclusive).")
@source_options()
@output_option()
@pass_globals
def range_(g: Globals, low: str | None, high: str | None, output: str, source: ops.StateSource) -> None:
    """Entries with keys from --from to --to (inclusive), in key order."""
    backend, store = _open(g, source)
    entries = ops.key_range(backend.entries(), None if low is None else ops.typed_key(low, source, store),
                            None if high is None else ops.typed_key(high, source, store))
    _emit(entries, output)


@state.command("all")
@click.option("--limit", type=click.IntRange(min=1), help="At most N entries.")
@source_options()
@output_option()
@pass_globals
def all_(g: Globals, limit: int | None, output: str, source: ops.StateSource) -> None:
    """Every entry, in key order."""
    backend, _ = _open(g, source)
    entries = backend.entries()
    _emit(entries[:limit] if limit else entries, output)


@state.command()
@source_options()
@output_option()
@pass_globals
def count(g: Globals, output: str, source: ops.StateSource) -> None:
    """The number of entries."""
    backend, _ = _open(g, source)
    n = len(backend.entries())
    emit(Listing([{"count": n}], [Column("count")], document={"count": n}), output)


@state.command()
@click.argument("key")
@click.option("--from", "time_from", type=TIME, metavar="TIME", help="Window start (window stores) / session end (session) from.")
@click.option("--to", "time_to", type=TIME, metavar="TIME", help="... to.")
@source_options()
@output_option()
@pass_globals
def fetch(g: Globals, key: str, time_from: int | None, time_to: int | None, output: str, source: ops.StateSource) -> None:
    """Window and session stores: KEY's windows or sessions in a time range."""
    backend, store = _open(g, source)
    kind = store.kind if store else cast(ChangelogBackend, backend).formats.key.layout  # only --changelog-topic has no store
    every, wanted = backend.entries(), ops.typed_key(key, source, store)
    entries = list(ops.fetch(every, wanted, time_from, time_to, kind))
    if entries or output != "table":
        _emit(entries, output)
    if entries:
        return
    window = "session" if kind == "session" else "window"
    elsewhere = len(list(ops.fetch(every, wanted, None, None, kind)))
    closed = ("" if source.from_changelog or source.changelog_topic else
              f"; closed {window}s leave it (its retention is size + grace): --from-changelog reads them")
    gone = ""
    if isinstance(backend, ChangelogBackend) and backend.retention_ms is not None:
        expired = len(ops.fetch(backend.expired, wanted, time_from, time_to, kind))
        if expired:  # a Kafka Streams store's, past its retention: gone from the store, not from its changelog
            gone = (f"; its changelog {backend.topic} still holds {expired} older {window}(s) of it, past the "
                    f"store's retention ({format_duration(backend.retention_ms)}), which Kafka Streams no "
                    "longer returns: a longer --retention reads them")
    raise KeyNotFoundError(f"not found: no {window} of {key!r} in that range ({elsewhere} outside it){gone}"
                           if elsewhere else f"not found: no {window} of {key!r} in the store{gone or closed}")


@state.command()
@click.option("--from-batch", type=click.IntRange(min=0), required=True)
@click.option("--to-batch", type=click.IntRange(min=0))
@source_options(with_batch=False)
@output_option()
@pass_globals
def changes(g: Globals, from_batch: int, to_batch: int | None, output: str, source: ops.StateSource) -> None:
    """The change feed: per committed batch, the keys that changed and their new values."""
    if to_batch is not None and to_batch < from_batch:
        raise UsageError(f"--to-batch {to_batch} is before --from-batch {from_batch}")
    backend, _ = _open(g, source)
    rows = [c.to_dict() for c in backend.changes(from_batch, to_batch)]
    emit(Listing(rows, [Column("batch_id", "BATCH", justify="right"), Column("change_type", "CHANGE"),
                        *ENTRY_COLUMNS]), output)
