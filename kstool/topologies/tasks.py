"""Runs a `kstool.streams` processor per task inside Spark's transformWithState.

The grouping key is the task (the input partition, as in Kafka Streams, or the partition a
repartition topic would give). A task's stores live in Spark's state (one MapState per store:
store key bytes -> value, timestamp, bookkeeping). Each micro-batch, its records are processed in
Kafka Streams' order against stores that read an entry from Spark's state when the processor
first asks for it (a small batch costs lookups of the keys it touches, not a read of the whole
store), and only the entries that changed are written back. Spark checkpoints the state with the
batch, so stream time, windows and join buffers survive restarts.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Callable, Iterator

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from kstool.streams.task import Processor, Record, StoreValue, TaskState, run_task, task_stores

INPUT_COLUMNS = ("task", "side", "key", "value", "number", "event_time", "partition", "offset")
OUTPUT_SCHEMA = StructType([
    StructField("role", StringType(), False), StructField("key", BinaryType()),
    StructField("value", BinaryType()), StructField("event_time", LongType(), False),
])
STORE_KEY_SCHEMA = StructType([StructField("key", BinaryType(), False)])
STORE_VALUE_SCHEMA = StructType([StructField("value", BinaryType()), StructField("timestamp", LongType()),
                                 StructField("aux", StringType())])
# a batch this large reads its stores whole: one scan instead of a lookup per key it touches
BULK_READ_RECORDS = 10_000
META = "task_meta"
META_SCHEMA = StructType([StructField("stream_time", LongType()), StructField("sequence", IntegerType())])


class MapStateStore(MutableMapping[bytes, StoreValue]):
    """One store of a task as its processor sees it during a batch: entries come from Spark's
    MapState when first asked for (or all at once when the processor iterates the store), and
    changes stay here until the batch's end writes them back."""

    def __init__(self, state: Any, read_all: bool):
        self.state = state
        self.known: dict[bytes, StoreValue | None] = {}  # None: absent (or deleted this batch)
        self.complete = not state.exists()  # an empty store has nothing to look up
        if read_all:
            self._read_all()

    def _lookup(self, key: bytes) -> StoreValue | None:
        if key not in self.known:
            if self.complete:
                return None
            found = self.state.getValue((key,))
            self.known[key] = None if found is None else StoreValue(*found)
        return self.known[key]

    def _read_all(self) -> None:
        if not self.complete:
            for (key,), value in self.state.iterator():
                if key not in self.known:  # what this batch changed wins
                    self.known[key] = StoreValue(*value)
            self.complete = True

    def __getitem__(self, key: bytes) -> StoreValue:
        value = self._lookup(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, bytes) and self._lookup(key) is not None

    def __setitem__(self, key: bytes, value: StoreValue) -> None:
        self.known[key] = value

    def __delitem__(self, key: bytes) -> None:
        if self._lookup(key) is None:
            raise KeyError(key)
        self.known[key] = None

    def __iter__(self) -> Iterator[bytes]:
        self._read_all()
        return iter([key for key, value in self.known.items() if value is not None])

    def __len__(self) -> int:
        self._read_all()
        return sum(value is not None for value in self.known.values())


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
        read_all = len(records) >= BULK_READ_RECORDS
        stores: dict[str, MutableMapping[bytes, StoreValue]] = {
            name: MapStateStore(state, read_all) for name, state in self.maps.items()}
        meta = self.meta.get() if self.meta.exists() else None
        state = TaskState(stores, *(meta or ()))
        emitted = run_task(self.processor, state, records)
        for name, keys in state.changed.items():
            for store_key, existed in keys.items():
                value = state.stores[name].get(store_key)
                if value is None:
                    if existed:
                        self.maps[name].removeKey((store_key,))
                else:
                    self.maps[name].updateValue((store_key,), (value.value, value.timestamp, value.stored_aux()))
        self.meta.update((state.stream_time, state.sequence))
        yield pd.DataFrame({"role": [e.role for e in emitted], "key": [e.key for e in emitted],
                            "value": [e.value for e in emitted], "event_time": [e.timestamp for e in emitted]},
                           columns=OUTPUT_SCHEMA.fieldNames())

    def close(self) -> None:
        pass


def run_tasks(rows, make_processor: Callable[[], Processor]):
    """rows: a streaming DataFrame with INPUT_COLUMNS -> the emitted records (OUTPUT_SCHEMA)."""
    return (rows.select(*INPUT_COLUMNS).groupBy("task")
            .transformWithStateInPandas(TaskProcessor(make_processor), OUTPUT_SCHEMA, "Update", "None"))
