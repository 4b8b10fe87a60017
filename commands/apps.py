"""kstool apps list|describe|top: the apps kstool finds in its state dir."""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections import deque
from pathlib import Path

import click

from kstool.application.model import LockHolder
from kstool.apps import describe as ops
from kstool.apps.kafka_streams import kafka_streams_apps
from kstool.apps.top import Top, TopOptions, check_lag
from kstool.base.documents import AppTopRow
from kstool.base.timeutil import format_duration, parse_duration
from kstool.commands.completion import complete_apps, complete_groups
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import output_option, state_dir_option
from kstool.output import Column, Dashboard, Listing, emit, sparkline, stdout_is_tty

SPARK_POINTS = 20  # lag samples in a dashboard row's trend


@click.group()
def apps() -> None:
    """Applications in the state dir: topology, progress, lag, stores."""


@apps.command("list")
@state_dir_option()
@click.option("--kafka-streams", is_flag=True,
              help="List the Kafka Streams applications the broker shows instead: streams groups, and groups "
                   "owning topics of Kafka Streams' internal names (kstool's apps among them).")
@output_option()
@pass_globals
def list_(g: Globals, state_dir: Path, kafka_streams: bool, output: str) -> None:
    """List apps with their topology, topics, last committed batch and whether they run."""
    if kafka_streams:
        emit(Listing(kafka_streams_apps(g.clients(), state_dir),
                     [Column("app_id"), Column("protocol"), Column("state"), Column("members", justify="right"),
                      Column("input_topics"), Column("internal_topics"), Column("kstool_app", "KSTOOL")]), output)
        return
    rows = ops.list_apps(state_dir)
    emit(Listing(rows, [Column("app_id"), Column("topology"), Column("input_topics"),
                        Column("output_topics"), Column("last_batch", justify="right"),
                        Column("running_pid", "RUNNING PID", justify="right"),
                        Column("engine_pid", "IN ENGINE", justify="right")]), output)


@apps.command()
@click.argument("app_id", shell_complete=complete_apps)
@state_dir_option()
@click.option("--offline", is_flag=True, help="Do not ask Kafka for the group's lag.")
@output_option()
@pass_globals
def describe(g: Globals, app_id: str, state_dir: Path, offline: bool, output: str) -> None:
    """Topology, last committed batch, processed offsets, group lag, stores of APP_ID."""
    doc = ops.describe_app(None if offline else g.clients(), state_dir, app_id)
    group = doc["group"]
    lag = {(p["topic"], p["partition"]): p["lag"] for p in (group["partitions"] if group else [])}
    rows = [{**p, "lag": lag.get((p["topic"], p["partition"]))} for p in doc["processed_offsets"]]
    stores = Listing([s for s in doc["stores"]],
                     [Column("name", "STORE"), Column("kind"), Column("changelog_topic"),
                      Column("key_format"), Column("value_format")])
    batch = doc["last_committed_batch"]
    missing = doc["missing_input_topics"]
    lag_text = (f"input topic(s) {', '.join(missing)} do not exist (deleted?): no lag" if missing
                else f"group lag {group['total_lag'] if group else '-'}")
    running = _running(doc["running_pid"], doc["engine_pid"])
    title = (f"app {doc['app_id']}: {doc['topology']}, "
             f"{'no committed batch yet' if batch is None else f'last committed batch {batch}'}, {running}, "
             f"{lag_text}")
    history = doc["history"]
    first = history["first_batch"]
    reach = ("its empty state before batch 0" if history["origin"] is not None and first in (0, None)
             else f"batch {first}" if first is not None else "nothing")
    kept = f"batches {first}..{history['last_batch']}" if first is not None else "no batch"
    footer = [f"history: {kept} kept (--history-batches {history['kept_batches']}: Spark keeps at least the last "
              f"{history['kept_batches']}, deleting older ones as it goes); reprocess reaches back to {reach}"]
    emit(Listing(rows, [Column("topic"), Column("partition", justify="right"),
                        Column("offset", "PROCESSED", justify="right"), Column("lag", justify="right")],
                 document=doc, title=title, extra_tables=[stores], footer=footer), output)


@apps.command()
@state_dir_option()
@click.option("--group", "groups", multiple=True, metavar="GROUP", shell_complete=complete_groups,
              help="Also watch this consumer group, e.g. a Kafka Streams app's application.id (repeatable).")
@click.option("--interval", default="2s", show_default=True, metavar="DURATION",
              help="Time between snapshots (a bare number: seconds, as top -d takes it); rates are measured over it.")
@click.option("--once", is_flag=True, help="Print one snapshot (rates over one --interval) and exit: for scripts.")
@click.option("--fail-on-lag", metavar="DURATION",
              help="With --once: exit 1 when an app's or group's time lag is over DURATION (cron health check).")
@output_option()
@pass_globals
def top(g: Globals, state_dir: Path, groups: tuple[str, ...], interval: str, once: bool, fail_on_lag: str | None, output: str) -> None:
    """Live view of every app in the state dir (and any --group): running or not, input and output
    rates, lag in records and in time, last batch, late and bad records. `q` or Ctrl-C quits.

    Piped or with -o json|jsonl|csv it prints a snapshot per interval; --once prints one."""
    limit_ms = parse_duration(fail_on_lag) if fail_on_lag else None
    seconds = re.fullmatch(r"\d+(\.\d+)?", interval.strip())
    watcher = Top(g.clients(), TopOptions(state_dir, tuple(groups),
                                          round(float(interval) * 1000) if seconds else parse_duration(interval)))
    if once:
        snapshots = watcher.watch(_sleep)
        next(snapshots)  # rates need a snapshot before
        rows = next(snapshots)
        _emit(rows, output)
        if limit_ms is not None:
            check_lag(rows, limit_ms)
    elif output == "table" and stdout_is_tty():
        trends: dict[str, deque[int | None]] = {}
        with Dashboard() as dashboard, contextlib.suppress(KeyboardInterrupt):  # Ctrl-C quits, as q does
            for rows in watcher.watch(dashboard.wait):
                for row in rows:
                    trends.setdefault(row["name"], deque(maxlen=SPARK_POINTS)).append(row["lag"])
                dashboard.show(_listing(rows, trends))
    else:
        for rows in watcher.watch(_sleep):
            _emit(rows, output)


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return True


def _emit(rows: list[AppTopRow], output: str) -> None:
    if output == "table":
        emit(_listing(rows), output)
    else:
        emit(Listing(list(rows), [Column(key) for key in AppTopRow.__annotations__]), output)
    sys.stdout.flush()  # each snapshot reaches a pipe when taken


_TOP_COLUMNS = [Column("name", "APP"), Column("state"), Column("in", "IN/S", justify="right"),
                Column("out", "OUT/S", justify="right"), Column("lag", justify="right"),
                Column("time_lag", "TIME LAG", justify="right"), Column("batch", justify="right"),
                Column("took", justify="right"), Column("late_records", "LATE", justify="right"),
                Column("bad_records", "BAD", justify="right")]


def _listing(rows: list[AppTopRow], trends: dict[str, deque[int | None]] | None = None) -> Listing:
    shown = [{**row, "name": row["name"] + (" (group)" if row["kind"] == "group" else ""),
              "state": _running(row["running_pid"], row["engine_pid"]) if row["running_pid"] else row["state"],
              "in": row["input_rate"], "out": row["output_rate"], "time_lag": format_duration(row["time_lag_ms"]),
              "batch": row["last_batch"], "took": format_duration(row["last_batch_ms"]),
              "trend": sparkline(list(trends[row["name"]])) if trends is not None else None} for row in rows]
    columns = _TOP_COLUMNS + ([Column("trend", "LAG TREND")] if trends is not None else [])
    title = time.strftime("kstool apps top  %H:%M:%S") + ("  (q quits)" if trends is not None else "")
    errors = [f"{row['name']}: {row['error']}" for row in rows if row["error"]]
    return Listing(shown, columns, title=title, footer=errors)


def _running(running_pid: int | None, engine_pid: int | None) -> str:
    """Who runs an app, for a table, as the app lock's holder says it everywhere."""
    return f"running ({LockHolder(running_pid, engine_pid)})" if running_pid else "not running"
