"""Runs a `kstool.streams` processor per task inside Spark's transformWithState.

The grouping key is the task (the input partition, as in Kafka Streams, or the partition a
repartition topic would give). Each micro-batch, a task's stores are read from Spark's state
(one MapState per store: store key bytes -> value, timestamp, bookkeeping), its records are
processed in Kafka Streams' order, and only the entries that changed are written back. Spark
checkpoints the state with the batch, so stream time, windows and join buffers survive restarts.
"""

from __future__ import annotations

from typing import Callable, Iterator

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from kstool.streams.task import Processor, Record, StoreValue, TaskState, run_task

INPUT_COLUMNS = ("task", "side", "key", "value", "number", "event_time", "partition", "offset")
OUTPUT_SCHEMA = StructType([
    StructField("role", StringType(), False), StructField("key", BinaryType()),
    StructField("value", BinaryType()), StructField("event_time", LongType(), False),
])
STORE_KEY_SCHEMA = StructType([StructField("key", BinaryType(), False)])
STORE_VALUE_SCHEMA = StructType([StructField("value", BinaryType()), StructField("timestamp", LongType()),
                                 StructField("aux", StringType())])
META = "task_meta"
META_SCHEMA = StructType([StructField("stream_time", LongType()), StructField("sequence", IntegerType())])


class TaskProcessor(StatefulProcessor):
    def __init__(self, make_processor: Callable[[], Processor]):
        self.make_processor = make_processor

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.processor = self.make_processor()
        self.maps = {name: handle.getMapState(name, STORE_KEY_SCHEMA, STORE_VALUE_SCHEMA)
                     for name in self.processor.stores}
        self.meta = handle.getValueState(META, META_SCHEMA)

    def handleInputRows(self, key, rows: Iterator[pd.DataFrame], timerValues) -> Iterator[pd.DataFrame]:
        stores = {name: {k[0]: StoreValue(*v) for k, v in state.iterator()} if state.exists() else {}
                  for name, state in self.maps.items()}
        meta = self.meta.get() if self.meta.exists() else None
        state = TaskState(stores, *(meta or ()))
        records = []
        for frame in rows:  # Arrow batches as pandas: whole columns to Python lists at once
            columns = [frame[c].tolist() for c in ("key", "value", "event_time", "side", "number",
                                                    "partition", "offset")]
            records += [Record(k, v, t, s, None if n != n else n, p, o)  # n != n: NaN, no number
                        for k, v, t, s, n, p, o in zip(*columns)]
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
