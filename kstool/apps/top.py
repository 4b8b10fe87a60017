"""kstool apps top: snapshots of every kstool app in a state dir and of any consumer group given
(a Kafka Streams app's application.id, say), for the live dashboard and for cron checks.

Per app: running or not (its run lock), input rate (how fast the offsets it has processed move),
output rate (how fast its output topics grow), lag in records and in time (the age of the first
record it has not processed: kstool.kafka.timelag), and from its metrics.jsonl the last batch,
its duration and the late and bad record totals. Groups: the same from their committed offsets.
Rates compare a snapshot with the one before, so the first snapshot has none."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from kstool.application.metrics import read_metrics
from kstool.application.model import AppPaths, Manifest, checkpoint_uri, iter_apps, lock_holder, running_pids
from kstool.apps.exceptions import LagLimitError
from kstool.base.documents import AppTopRow
from kstool.base.errors import KstoolError
from kstool.base.timeutil import now_ms
from kstool.checkpoint.location import local_path
from kstool.checkpoint.logs import committed_offsets
from kstool.engine import open_app_checkpoint
from kstool.kafka.client import KafkaClients
from kstool.kafka.groups import committed_offsets as committed_offsets_of_group, describe_group
from kstool.kafka.timelag import time_lags_ms

TP = tuple[str, int]


@dataclass(frozen=True)
class TopOptions:
    state_dir: Path
    groups: tuple[str, ...] = ()
    interval_ms: int = 2_000


@dataclass(frozen=True)
class _Position:
    """Where a group and its outputs stood at a snapshot: what rates are measured between."""

    at_ms: int
    committed: int | None
    output_end: int | None


class Top:
    """Takes the snapshots; remembers each row's last position, so the next one has rates."""

    def __init__(self, clients: KafkaClients, options: TopOptions):
        self.clients, self.options = clients, options
        self._before: dict[tuple[str, str], _Position] = {}

    def snapshot(self) -> list[AppTopRow]:
        """A row per app; an app whose figures cannot be read (its input topic deleted, say)
        gets a row in state "error" with the reason, and the others their figures."""
        rows = []
        for paths, manifest in iter_apps(self.options.state_dir):
            try:
                rows.append(self._app_row(paths, manifest))
            except KstoolError as failure:
                row = self._row(manifest.app_id, "app", "error", None, None, None, None)
                rows.append({**row, **running_pids(lock_holder(paths)), "error": str(failure)})
        return rows + [self._group_row(group) for group in self.options.groups]

    def watch(self, wait: Callable[[float], bool]) -> Iterator[list[AppTopRow]]:
        """A snapshot now, then one per interval for as long as `wait` returns True."""
        while True:
            yield self.snapshot()
            if not wait(self.options.interval_ms / 1000):
                return

    def _app_row(self, paths: AppPaths, manifest: Manifest) -> AppTopRow:
        holder = lock_holder(paths)
        inputs = set(manifest.input_topics)
        self.clients.require_topics(manifest.input_topics)  # a deleted input: say which
        positions = {tp: o for tp, o in self._processed(paths, manifest).items() if tp[0] in inputs}
        lag, time_lag = self._lags(positions) if positions else (None, None)
        metrics = read_metrics(paths)
        last = metrics[-1] if metrics else None
        row = self._row(manifest.app_id, "app", "running" if holder else "stopped",
                        sum(positions.values()) if positions else None, lag, time_lag,
                        self._output_end(manifest.output_topics))
        row.update({**running_pids(holder),
                    "last_batch": last["batch_id"] if last else None,
                    "last_batch_ms": last["duration_ms"] if last else None,
                    "last_batch_at": last["time_ms"] if last else None,
                    "late_records": last["late_total"] if last else None,
                    "bad_records": last["bad_total"] if last else None})
        return row

    def _processed(self, paths: AppPaths, manifest: Manifest) -> dict[TP, int]:
        """Where the app stands. Its checkpoint says it exactly; its group trails it by a batch
        (Spark commits a batch's offsets to the source when the next batch starts), so an idle
        app would seem a batch behind for ever. A checkpoint elsewhere (hdfs://...) would need
        a JVM to read: there the group's offsets do."""
        if local_path(checkpoint_uri(paths, manifest.checkpoint_location)) is None:
            return committed_offsets_of_group(self.clients, manifest.app_id)
        return committed_offsets(open_app_checkpoint(paths, manifest))[1]

    def _lags(self, positions: dict[TP, int]) -> tuple[int, int | None]:
        """Records behind, and the oldest unprocessed record's age (None: it could not be read)."""
        ends = {tp: high for tp, (_, high) in self.clients.watermarks(sorted(positions)).items()}
        waits = time_lags_ms(self.clients, positions, ends)
        return sum(max(ends[tp] - offset, 0) for tp, offset in positions.items()), _oldest(list(waits.values()))

    def _group_row(self, name: str) -> AppTopRow:
        group = describe_group(self.clients, name, time_lag=True)  # a group asked for must exist
        partitions = group["partitions"]
        return self._row(name, "group", group["state"], sum(p["committed"] or 0 for p in partitions) if partitions else None,
                         group["total_lag"] if partitions else None,
                         _oldest([p.get("time_lag_ms") for p in partitions]), None)

    def _row(self, name: str, kind: str, state: str, committed: int | None, lag: int | None,
             time_lag: int | None, output_end: int | None) -> AppTopRow:
        at = now_ms()
        now = _Position(at, committed, output_end)
        before = self._before.get((kind, name))
        self._before[(kind, name)] = now
        return {"name": name, "kind": kind, "state": state, "running_pid": None, "engine_pid": None,
                "input_rate": _rate(before, now, "committed"), "output_rate": _rate(before, now, "output_end"),
                "lag": lag, "time_lag_ms": time_lag,
                "last_batch": None, "last_batch_ms": None, "last_batch_at": None,
                "late_records": None, "bad_records": None, "sampled_at": at, "error": None}

    def _output_end(self, topics: list[str]) -> int | None:
        try:
            tps = [(t, p) for t in topics for p in self.clients.topic_partitions(t)]
            return sum(high for _, high in self.clients.watermarks(tps).values())
        except KstoolError:
            return None  # not created yet


def _rate(before: _Position | None, now: _Position, field: str) -> float | None:
    if before is None:
        return None
    start, end = getattr(before, field), getattr(now, field)
    seconds = (now.at_ms - before.at_ms) / 1000
    if start is None or end is None or seconds <= 0 or end < start:  # end < start: reset meanwhile
        return None
    return round((end - start) / seconds, 1)


def _oldest(waits: list[int | None]) -> int | None:
    """The longest wait of some partitions; None when one of them could not be read."""
    known = [w for w in waits if w is not None]
    return max(known, default=0) if len(known) == len(waits) else None


def check_lag(rows: list[AppTopRow], limit_ms: int) -> None:
    over = {r["name"]: lag for r in rows if (lag := r["time_lag_ms"]) is not None and lag > limit_ms}
    if over:
        raise LagLimitError(f"time lag over {limit_ms / 1000:g}s: " + ", ".join(
            f"{name} {lag / 1000:.1f}s" for name, lag in over.items()))
