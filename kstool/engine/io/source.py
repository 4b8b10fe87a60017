"""The Kafka streaming source: a PySpark Python data source built on confluent-kafka.

Offsets are {topic: {partition: next offset}} (string keys: Spark stores them as JSON).
The initial offsets are the committed offsets of the application's consumer group, so a reset
of the group is what a fresh checkpoint starts from; after each batch the processed offsets are
committed to that group, so `kstool groups describe <app-id>` and every lag tool see progress.
"""

from __future__ import annotations

import faulthandler
import json
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from kstool.checkpoint.logs import FIRST_BATCH_MARKER
from kstool.engine.failures import DATA_LOSS, marked
from kstool.engine.io.combining import combined, combiner_from_spec
from kstool.engine.io.gate import wait_for_gate
from kstool.engine.io.range_reader import (
    SCHEMA,
    OffsetRange,
    compacted,
    keyed,
    read_range,
    value_json_decoder_for,
    with_batch_time,
)
from kstool.engine.io.source_options import (
    CLIENT_CONFIG_FILE_OPTION,
    COMBINER_OPTION,
    GATE_FILE_OPTION,
    HISTORY_TOPICS_OPTION,
    SEED_TOPICS_OPTION,
    SOURCE_NAME,
    VALUE_SCHEMA_OPTION,
    Offsets,
    flatten_offsets,
    input_ends,
    nest_offsets,
    partitions_of,
    read_client_config,
)
from kstool.kafka.client import KafkaClients

if TYPE_CHECKING:  # the driver's source process never loads pyarrow
    import pyarrow as pa

# a parked query whose gate is shut: how long a trigger waits for a run to open it. Spark's trigger
# loop then turns twice a minute instead of every PARK_TRIGGER_MS, which cost the engine's JVM
# and the query's source process ~0.9% of a core per parked query (bench.engine_idle)
GATE_WAIT_S = 30.0


class KafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return SCHEMA

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        return KafkaStreamReader(self.options)

    def reader(self, schema: StructType) -> ChangelogReader:
        return ChangelogReader(self.options)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side: plans offset ranges. read() runs on executors from a pickled copy."""

    def __init__(self, options: Mapping[str, str]):
        if not faulthandler.is_enabled():  # a crash of Spark's source process then leaves its Python stack in the log
            faulthandler.enable()
        self.config = read_client_config(options[CLIENT_CONFIG_FILE_OPTION])
        self.topics = [t for t in options["topics"].split(",") if t]
        self.group = options["group"]
        self.starting = options.get("starting", "earliest")
        self.on_data_loss = options.get("on_data_loss", "fail")
        max_batch = int(options.get("max_records_per_batch", "0"))
        self.max_records_per_batch = max_batch or None
        self.max_records_per_task = int(options.get("max_records_per_task", "500000"))
        self._stop = flatten_offsets(json.loads(options.get("stop_offsets", "{}")))  # reprocess --to-time
        self.commit_offsets = options.get("commit_offsets", "true") == "true"
        # a restore: the first batch of the new checkpoint seeds the state and reads no input;
        # for Spark's own aggregations its rows are these changelogs' entries
        self.seed_batch = options.get("seed_batch", "false") == "true"
        self.seed_topics = [t for t in options.get(SEED_TOPICS_OPTION, "").split(",") if t]
        self.value_schema = options.get(VALUE_SCHEMA_OPTION)
        self.gate = options.get(GATE_FILE_OPTION)
        self.combiner = options.get(COMBINER_OPTION)
        self._target: dict[tuple[str, int], int] | None = None
        self._latest: dict[tuple[str, int], int] | None = None
        self._kafka: KafkaClients | None = None

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_kafka": None}  # the executors' copies make their own clients

    # -- driver ----------------------------------------------------------------------------
    def _clients(self) -> KafkaClients:
        """One set of clients for the query's life. A new AdminClient per call, as this was,
        crashed Spark's source process now and then: a segfault inside the first list_offsets
        of a new client under CPU contention (confluent-kafka 2.16; 3 of 3 loops of new clients
        crashed within 40 s with another process busy, 0 of 3 reusing one over ~200k calls)."""
        if self._kafka is None:
            self._kafka = KafkaClients(self.config)
        return self._kafka

    def _partitions(self) -> list[tuple[str, int]]:
        return partitions_of(self._clients(), self.topics)

    def initialOffset(self) -> Offsets:
        from kstool.kafka.groups import starting_offsets

        return nest_offsets(starting_offsets(self._clients(), self.group, self._partitions(), self.starting))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_records_per_batch:
            return ReadMaxRows(self.max_records_per_batch)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = input_ends(self._clients(), self.topics)

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        if self.gate is not None:
            gate = wait_for_gate(self.gate, GATE_WAIT_S)
            if gate is None:
                return start  # parked: no run asks for anything, and Kafka is not asked either
            self._target = gate
        current = flatten_offsets(start)
        # a partition whose leader is being elected again (a node lost) is read on next batch
        marks = self._clients().watermarks(self._partitions(), answered_only=True)
        latest = dict(self._target) if self._target is not None else {tp: h for tp, (_, h) in marks.items()}
        latest = {tp: min(o, self._stop.get(tp, o)) for tp, o in latest.items()}
        self._latest = latest
        behind = {tp: (current[tp], high) for tp, (_, high) in marks.items()
                  if tp in current and current[tp] > high}
        if behind and self.on_data_loss == "fail":
            detail = ", ".join(f"{t}:{p} is at offset {o} but the log ends at {h}"
                               for (t, p), (o, h) in sorted(behind.items()))
            raise marked(DATA_LOSS, f"input offsets are past the end of the log ({detail}): was "
                         "the topic deleted and recreated? Rerun with --on-data-loss earliest to "
                         "start over from the log start")
        for tp in latest:
            current.setdefault(tp, 0)  # a partition added since the last batch starts at 0
        end = {tp: latest.get(tp, o) if tp in behind else max(latest.get(tp, o), o)
               for tp, o in current.items()}
        if self.seed_batch and FIRST_BATCH_MARKER not in current:
            return nest_offsets({**current, FIRST_BATCH_MARKER: 1})
        if isinstance(limit, ReadMaxRows):
            end = _cap(current, end, limit.max_rows)
        return nest_offsets(end)

    def reportLatestOffset(self) -> Offsets | None:
        return nest_offsets(self._latest) if self._latest else None

    def partitions(self, start: Offsets, end: Offsets) -> list[OffsetRange]:
        begin, finish = flatten_offsets(start), _kafka_only(flatten_offsets(end))
        firsts = self._first_offsets(begin, finish)
        ranges = []
        if self.seed_topics and FIRST_BATCH_MARKER in flatten_offsets(end) and FIRST_BATCH_MARKER not in begin:
            ranges += changelog_ranges(self._clients(), self.seed_topics)
        planned_us = time.time_ns() // 1000
        for tp, stop in sorted(finish.items()):
            for chunk_start in range(firsts.get(tp, stop), stop, self.max_records_per_task):
                ranges.append(OffsetRange(tp[0], tp[1], chunk_start,
                                          min(chunk_start + self.max_records_per_task, stop), planned_us=planned_us))
        return ranges

    def _first_offsets(self, begin: dict[tuple[str, int], int], finish: dict[tuple[str, int], int]
                       ) -> dict[tuple[str, int], int]:
        """Where each range starts: the batch start, or the log start when records before it
        are gone (retention) or the log was recreated (only with --on-data-loss earliest)."""
        todo = [tp for tp, stop in finish.items() if stop != begin.get(tp, 0)]
        if not todo:
            return {}
        starts = self._clients().log_starts(todo)
        firsts, lost = {}, {}
        for tp in todo:
            first, low = begin.get(tp, 0), starts[tp]
            if first > finish[tp]:  # recreated: latestOffset let this through on purpose
                first = low
            elif first < low:
                lost[tp] = (first, low)
                first = low
            firsts[tp] = first
        if lost and self.on_data_loss == "fail":
            detail = ", ".join(f"{t}:{p} offsets {a}..{b - 1} ({b - a} records)"
                               for (t, p), (a, b) in sorted(lost.items()))
            raise marked(DATA_LOSS, f"records were deleted (retention) before they were processed: "
                         f"{detail}; rerun with --on-data-loss earliest to continue from the log start")
        return firsts

    def commit(self, end: Offsets) -> None:
        from kstool.kafka.groups import commit_offsets

        if self.commit_offsets:
            commit_offsets(self._clients(), self.group, _kafka_only(flatten_offsets(end)))

    # -- executors -------------------------------------------------------------------------
    def read(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:  # type: ignore[override]  # our plan's partitions
        return with_batch_time(self._rows(partition), partition.planned_us)

    def _rows(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:
        if partition.restore:
            return compacted(read_range(self.config, partition))
        to_json = value_json_decoder_for(self.value_schema, self.config) if self.value_schema else None
        records = read_range(self.config, partition, to_json)
        return combined(combiner_from_spec(self.combiner), partition, records) if self.combiner else records


class ChangelogReader(DataSourceReader):
    """A batch read of changelogs' compacted views, each partition by an executor: a restore's
    seed of per-task stores (kstool.engine.query.seed), so that no store entry passes the driver."""

    def __init__(self, options: Mapping[str, str]):
        self.config = read_client_config(options[CLIENT_CONFIG_FILE_OPTION])
        self.topics = [t for t in options[SEED_TOPICS_OPTION].split(",") if t]
        self.history = {t for t in options.get(HISTORY_TOPICS_OPTION, "").split(",") if t}

    def partitions(self) -> list[OffsetRange]:  # type: ignore[override]  # our plan's partitions
        return changelog_ranges(KafkaClients(self.config), self.topics)

    def read(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:  # type: ignore[override]  # our plan's partitions
        batches = read_range(self.config, partition)
        yield from with_batch_time(keyed(batches) if partition.topic in self.history else compacted(batches), None)


def changelog_ranges(clients: KafkaClients, topics: list[str]) -> list[OffsetRange]:
    """Every partition of the changelogs, whole, to be read as store entries."""
    found = clients.require_topics(topics)
    marks = clients.watermarks([(t, p) for t in topics for p in found[t]])
    return [OffsetRange(t, p, low, high, restore=True) for (t, p), (low, high) in sorted(marks.items())]


def _kafka_only(offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    return {tp: o for tp, o in offsets.items() if tp != FIRST_BATCH_MARKER}


def _cap(start: dict[tuple[str, int], int], end: dict[tuple[str, int], int], budget: int) -> dict[tuple[str, int], int]:
    """Split a record budget across partitions in proportion to what each has available, all
    of it: what rounding down leaves goes to the largest remainders (else a backlog of two
    budgets took a third batch of a few records, ~1 s). A partition with records gets one at least."""
    available = {tp: end[tp] - start.get(tp, 0) for tp in end}
    total = sum(available.values())
    if total <= budget:
        return end
    shares = {tp: budget * n // total for tp, n in available.items()}
    by_remainder = sorted(available, key=lambda tp: budget * available[tp] % total, reverse=True)
    for tp in by_remainder[:budget - sum(shares.values())]:
        shares[tp] += 1  # its remainder is not 0: its share stays within what it has
    return {tp: start.get(tp, 0) + (max(1, share) if available[tp] else 0) for tp, share in shares.items()}
