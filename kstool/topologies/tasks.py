"""Runs a `kstool.streams` processor per task inside Spark's transformWithState.

The grouping key is the task (the input partition, as in Kafka Streams, or the partition a
repartition topic would give). A task's stores live in Spark's state (one MapState per store:
store key bytes -> value, timestamp, bookkeeping). Each micro-batch, its records are processed in
Kafka Streams' order against stores that read an entry from Spark's state when the processor
first asks for it (a small batch costs lookups of the keys it touches, not a read of the whole
store; the keys a batch will touch are asked for at once), and only the entries that changed are
written back (kstool.topologies.map_state). Spark checkpoints the state with the batch, so
stream time, windows and join buffers survive restarts.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Callable, Iterator, cast

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from kstool.streams.task import Processor, Record, Restorable, StoreValue, TaskState, run_task, task_stores
from kstool.topologies.map_state import MapStateStore, PipelinedMapState

INPUT_COLUMNS = ("task", "side", "key", "value", "number", "event_time", "partition", "offset")
# a topology whose source combines (kstool.streams.task.Record.partial) adds these
PARTIAL_COLUMNS = ("window", "count", "latest", "range")
OUTPUT_SCHEMA = StructType([
    StructField("role", StringType(), False), StructField("key", BinaryType()),
    StructField("value", BinaryType()), StructField("event_time", LongType(), False),
    StructField("task", IntegerType(), False),
])
STORE_KEY_SCHEMA = StructType([StructField("key", BinaryType(), False)])
STORE_VALUE_SCHEMA = StructType([StructField("value", BinaryType()), StructField("timestamp", LongType()),
                                 StructField("aux", StringType())])
# a batch this large reads its stores whole: one scan instead of a lookup per key it touches
BULK_READ_RECORDS = 10_000
META = "task_meta"
META_SCHEMA = StructType([StructField("stream_time", LongType()), StructField("sequence", IntegerType())])


class TaskProcessor(StatefulProcessor):
    def __init__(self, make_processor: Callable[[], Processor]):
        self.make_processor = make_processor

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.processor = self.make_processor()
        self.maps = {name: handle.getMapState(name, STORE_KEY_SCHEMA, STORE_VALUE_SCHEMA)
                     for name in task_stores(self.processor)}
        self.meta = handle.getValueState(META, META_SCHEMA)

    def handleInputRows(self, key, rows: Iterator[pd.DataFrame], timerValues) -> Iterator[pd.DataFrame]:
        records = []
        for frame in rows:  # Arrow batches as pandas: whole columns to Python lists at once
            columns = [frame[c].tolist() for c in ("key", "value", "event_time", "side", "number",
                                                    "partition", "offset")]
            records += [Record(k, v, t, s, None if n != n else n, p, o)  # n != n: NaN, no number
                        for k, v, t, s, n, p, o in zip(*columns)]
            if "count" in frame.columns:
                _add_partials(records[len(records) - len(frame):], frame)
        read_all = len(records) >= BULK_READ_RECORDS
        stores = {name: MapStateStore(state, read_all) for name, state in self.maps.items()}
        if not read_all:  # what the batch will read, asked for at once
            for name, wanted in self.processor.reads(records).items():
                stores[name].prefetch(wanted)
        meta = self.meta.get() if self.meta.exists() else None
        state = TaskState(cast(dict[str, MutableMapping[bytes, StoreValue]], stores), *(meta or ()))
        emitted = run_task(self.processor, state, records)
        for name, changed in state.changed.items():
            stores[name].write_back(changed)
        self.meta.update((state.stream_time, state.sequence))
        yield pd.DataFrame({"role": [e.role for e in emitted], "key": [e.key for e in emitted],
                            "value": [e.value for e in emitted], "event_time": [e.timestamp for e in emitted],
                            "task": [int(key[0])] * len(emitted)}, columns=OUTPUT_SCHEMA.fieldNames())

    def handleInitialState(self, key, initialState: pd.DataFrame, timerValues) -> None:
        """A restore (the first batch of a new checkpoint): the task's changelog entries back in
        its stores. Stream time is the newest of their timestamps, as each update carries the
        newest record it holds; what had left a store by its newest is left out."""
        processor = cast(Restorable, self.processor)
        stream_time = int(initialState["timestamp"].max())
        observed = initialState.groupby("store")["timestamp"].max().to_dict()
        writes: dict[str, list[tuple[bytes, tuple]]] = {}
        entries = zip(*(initialState[c].tolist() for c in ("store", "key", "value", "timestamp")))
        for store, store_key, value, ts in entries:
            restored = processor.restored(store, store_key, value, ts, int(observed[store]))
            if restored is not None:
                writes.setdefault(store, []).append(
                    (store_key, (restored.value, restored.timestamp, restored.stored_aux())))
        for store, entries_of_store in writes.items():
            PipelinedMapState(self.maps[store]).write_many(entries_of_store)
        self.meta.update((stream_time, 0))

    def close(self) -> None:
        pass


def _add_partials(records: list[Record], frame: pd.DataFrame) -> None:
    """The partial of each combined row (null columns: NaN in pandas)."""
    counts = frame["count"].tolist()
    if all(c != c for c in counts):
        return
    windows, latest, ranges = (frame[c].tolist() for c in ("window", "latest", "range"))
    for record, window, count, last, range_start in zip(records, windows, counts, latest, ranges):
        if count == count:
            record.partial = (None if window != window else int(window), int(count), int(last), int(range_start))


def run_tasks(rows, make_processor: Callable[[], Processor], seed=None):
    """rows: a streaming DataFrame with INPUT_COLUMNS (and PARTIAL_COLUMNS where the source
    combines) -> the emitted records (OUTPUT_SCHEMA). seed: a restore's store entries
    (kstool.engine.seed.SEED_COLUMNS), applied in the first batch of a new checkpoint."""
    initial = {"initialState": seed.groupBy("task")} if seed is not None else {}
    columns = INPUT_COLUMNS + (PARTIAL_COLUMNS if set(PARTIAL_COLUMNS) <= set(rows.columns) else ())
    return (rows.select(*columns).groupBy("task")
            .transformWithStateInPandas(TaskProcessor(make_processor), OUTPUT_SCHEMA, "Update", "None", **initial))
