"""kstool changelog list|describe|dump: read state through its changelog topics."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Callable

import click

from kstool.base.timeutil import parse_time
from kstool.changelog import operations as ops
from kstool.changelog.operations import Formats
from kstool.commands.completion import complete_groups, complete_topics
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import STORE_FORMATS, F, SchemaFlags, output_option, schema_options, state_dir_option
from kstool.kafka.client import KafkaClients
from kstool.kafka.consume import StartSpec
from kstool.output import Column, Listing, dumps, emit, warn

ROW_COLUMNS = [Column("partition", justify="right"), Column("offset", justify="right"),
               Column("timestamp", kind="time"), Column("key"), Column("window_start", kind="time"),
               Column("window_end", kind="time"), Column("seqnum"), Column("value"), Column("tombstone")]



_state_dir_option: Callable[[F], F] = state_dir_option("Where kstool apps live (their manifests name the formats).")


@click.group()
def changelog() -> None:
    """Inspect changelog topics of kstool and Kafka Streams apps."""


@changelog.command("list")
@click.option("--app-id", help="Only this application's changelogs.", shell_complete=complete_groups)
@_state_dir_option
@output_option()
@pass_globals
def list_(g: Globals, app_id: str | None, state_dir: Path, output: str) -> None:
    """Changelog topics by naming convention, with app id, store, partitions, records, policy."""
    rows = ops.list_changelogs(g.clients(), state_dir, app_id)
    emit(Listing(rows, [Column("topic"), Column("app_id"), Column("store"),
                        Column("partitions", justify="right"), Column("records", justify="right"),
                        Column("cleanup_policy")]), output)


def _format_options(func: F) -> F:
    func = schema_options()(func)
    func = click.option("--detect", is_flag=True,
                        help="Guess the layout and formats from the bytes for a kstool app's changelog too "
                             "(its manifest gives them otherwise; other topics are always guessed).")(func)
    func = click.option("--value-format", type=STORE_FORMATS, help="Value serde.")(func)
    func = click.option("--key-format", metavar="FMT|windowed:FMT|session:FMT|time-windowed:FMT",
                        help="Key serde and layout, e.g. string, windowed:long (a window store's), session:avro; "
                             "time-windowed:FMT: an aggregate's output keys (key and window start).")(func)
    return _state_dir_option(func)


def _formats(g: Globals, clients: KafkaClients, topic: str, state_dir: Path, key_format: str | None,
             value_format: str | None, detect: bool, schema_flags: SchemaFlags) -> Formats:
    return ops.resolve_formats(clients, topic, state_dir, key_format, value_format, detect,
                               schema_flags.options(g.client_config().schema_registry))


@changelog.command()
@click.argument("topic", shell_complete=complete_topics)
@_format_options
@output_option()
@pass_globals
def describe(g: Globals, topic: str, key_format: str | None, value_format: str | None, detect: bool, state_dir: Path,
             schema_flags: SchemaFlags, output: str) -> None:
    """Per partition: offsets, records, distinct keys, tombstones, records per key,
    timestamps; and the detected layout with its evidence."""
    clients = g.clients()
    formats = _formats(g, clients, topic, state_dir, key_format, value_format, detect, schema_flags)
    doc = ops.describe(clients, topic, formats)
    total, layout = doc["total"], doc["layout"]
    emit(Listing(doc["partitions"],
                 [Column("partition", justify="right"), Column("low_offset", "LOW", justify="right"),
                  Column("high_offset", "HIGH", justify="right"), Column("records", justify="right"),
                  Column("distinct_keys", "KEYS", justify="right"),
                  Column("tombstones", justify="right"), Column("records_per_key", "REC/KEY", justify="right"),
                  Column("oldest_timestamp", "OLDEST", kind="time"), Column("newest_timestamp", "NEWEST", kind="time")],
                 document=doc, title=f"{topic}: {total['records']} records, {total['distinct_keys']} keys, "
                                     f"{total['tombstones']} tombstones, compaction would reclaim "
                                     f"{total['reclaimable_records']}",
                 footer=[f"layout: {layout['detected']} ({layout['evidence']})",
                         f"formats: key {layout['formats']['key']}, value {layout['formats']['value']} "
                         f"({layout['formats']['source']})"]), output)


def _position(text: str | None) -> tuple[int | None, int | None]:
    """An offset (digits), or a time (ISO-8601, -1h, or @epoch-ms)."""
    if text is None:
        return None, None
    if re.fullmatch(r"\d+", text.strip()):
        return int(text), None
    return None, parse_time(text)


def _start(text: str | None) -> tuple[StartSpec, int | None]:
    """--from: where to start, and a time to start at (None: none)."""
    if text is not None and re.fullmatch(r"-\d+", text.strip()):
        return StartSpec.parse(text), None  # the last N of each partition
    offset, time = _position(text)
    return (StartSpec("beginning") if offset is None else StartSpec("offset", offset)), time


@changelog.command()
@click.argument("topic", shell_complete=complete_topics)
@_format_options
@click.option("--compact", is_flag=True, help="The view a full compaction would leave (latest per key).")
@click.option("--show-tombstones", is_flag=True, help="With --compact, keep deleted keys (marked).")
@click.option("--key", "key", help="Only this key (decoded, as text).")
@click.option("--key-prefix", help="Only keys starting with this text.")
@click.option("--from", "from_", metavar="OFFSET|-N|TIME",
              help="Start at an offset, the last N records of each partition (-N, as consume), or a time "
                   "(@epoch-ms, ISO, -1h).")
@click.option("--to", "to", metavar="OFFSET|TIME", help="Stop after an offset or a time.")
@click.option("--follow", "-F", is_flag=True, help="Keep printing new records until Ctrl-C.")
@click.option("--partition", "-p", "partitions", type=click.IntRange(min=0), multiple=True)
@output_option()
@pass_globals
def dump(g: Globals, topic: str, key_format: str | None, value_format: str | None, detect: bool, state_dir: Path,
         schema_flags: SchemaFlags, compact: bool, show_tombstones: bool, key: str | None, key_prefix: str | None,
         from_: str | None, to: str | None, follow: bool, partitions: tuple[int, ...], output: str) -> None:
    """Decoded records of a changelog topic (or the compacted view)."""
    clients = g.clients()
    formats = _formats(g, clients, topic, state_dir, key_format, value_format, detect, schema_flags)
    start, start_time = _start(from_)
    to_offset, to_time = _position(to)
    options = ops.DumpOptions(
        topic=topic, formats=formats, compact=compact, show_tombstones=show_tombstones, key=key,
        key_prefix=key_prefix, start=start, from_time=start_time, to_offset=to_offset, to_time=to_time,
        follow=follow, partitions=list(partitions) or None)
    stats = ops.DecodeStats()
    rows = (ops.public(r) for r in ops.dump(clients, options, stats))
    try:
        if follow or output == "jsonl":
            for row in rows:
                sys.stdout.write(dumps(row) + "\n" if output in ("jsonl", "json") else _line(row))
                sys.stdout.flush()
        else:
            emit(Listing(list(rows), ROW_COLUMNS), output)
    except KeyboardInterrupt:
        pass
    if stats.bad_keys or stats.bad_values:
        warn(f"{stats.bad_keys} key(s) and {stats.bad_values} value(s) could not be decoded as "
             f"{formats.key.layout}:{formats.key.key_format} / {formats.value}; shown as hex"
             + ("; an aggregate's output topic has time-windowed:FMT keys" if stats.bad_keys and
                formats.key.layout == "window" else ""))


def _line(row: dict[str, Any]) -> str:
    window = (f" [{row['window_start']}..{row['window_end'] if row['window_end'] is not None else ''}]"
              if row["window_start"] is not None else "")
    value = "<tombstone>" if row["tombstone"] else dumps(row["value"])
    return f"{row['partition']}@{row['offset']} {dumps(row['key'])}{window} = {value}\n"
