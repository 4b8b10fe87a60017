"""Runs a `kstool.streams` processor per task inside Spark's transformWithState.

The grouping key is the task (the input partition, as in Kafka Streams, or the partition a
repartition topic would give). A task's stores live in Spark's state, one MapState per store
holding the store's entries in shards of a few thousand (kstool.tasks.shards). Each
micro-batch, its records are processed in Kafka Streams' order against stores that read a
shard from Spark's state when the processor first asks for one of its keys (a small batch costs
the shards of the keys it touches, asked for at once; a large one reads the store whole), and
only the shards that changed are written back. Spark checkpoints the state with the batch, so
stream time, windows and join buffers survive restarts.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, Iterator, cast

import numpy as np
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from kstool.contract import PACK, PACKED, owner_suffixes
from kstool.engine import pack_records
from kstool.streams.headers import Headers
from kstool.streams.task import (
    NO_TIME,
    Emitted,
    Processor,
    Record,
    Replayable,
    Restorable,
    Staged,
    StoreValue,
    TaskState,
    collector_paused,
    run_task,
    task_stores,
)
from kstool.tasks.combiners.packs import unpack
from kstool.tasks.repartition import PASS_THROUGH, STAGE_INPUT_SCHEMA, next_stage_rows
from kstool.tasks.shards import Directory, ShardedStore

if TYPE_CHECKING:  # pandas is imported where a frame is made: Spark's driver-side runner that
    import pandas as pd  # reads the processor's state schemas never makes one (~0.3 CPU-s a query start)
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.stateful_processor import TimerValues

# pack: a row that stands for the records packed in it (kstool.tasks.combiners.packs), else null;
# headers: a record's as JSON text (kstool.topologies.events.headers_text), null for none
INPUT_COLUMNS = ("task", "side", "key", "value", "number", "event_time", "partition", "offset", "pack", "headers")
# a topology whose source combines (kstool.streams.task.Record.partial) adds these
PARTIAL_COLUMNS = ("window", "count", "latest", "range")
OUTPUT_SCHEMA = StructType([
    StructField("role", StringType(), False), StructField("key", BinaryType()),
    StructField("value", BinaryType()), StructField("event_time", LongType(), False),
    StructField("task", IntegerType(), False), StructField(PACK, BinaryType()),
])
SHARD_KEY_SCHEMA = StructType([StructField("shard", BinaryType(), False)])
SHARD_VALUE_SCHEMA = StructType([StructField("entries", BinaryType(), False)])
# a batch this large reads its stores whole: one scan instead of a lookup per key it touches
BULK_READ_RECORDS = 10_000
META = "task_meta"
# stream time, join sequence, and each store's shard directory as JSON ({store: [level, split, entries(, suffix)]})
META_SCHEMA = StructType([StructField("stream_time", LongType()), StructField("sequence", IntegerType()),
                          StructField("directories", StringType())])


class TaskProcessor(StatefulProcessor):
    """next_tasks: this stage feeds a next one of that many tasks (kstool.tasks.repartition)."""

    def __init__(self, make_processor: Callable[[], Processor], next_tasks: int | None = None):
        self.make_processor, self.next_tasks = make_processor, next_tasks

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.processor = self.make_processor()
        self.maps = {name: handle.getMapState(name, SHARD_KEY_SCHEMA, SHARD_VALUE_SCHEMA)
                     for name in task_stores(self.processor)}
        self.meta = handle.getValueState(META, META_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        # the batch's objects are gone when _batch returns: the collector, back on, finds none to walk
        with collector_paused():
            frame = self._batch(int(key[0]), rows)
        yield frame

    def _batch(self, task: int, rows: Iterator[pd.DataFrame]) -> pd.DataFrame:
        records: list[Record] = []
        passed: list[bytes] = []  # an earlier stage's sink records, for the sink
        for frame in rows:  # Arrow batches as pandas: whole columns to Python lists at once
            through = frame["side"] == PASS_THROUGH
            if through.any():
                passed += frame["pack"][through].tolist()
                frame = frame[~through]
            columns = [frame[c].tolist() for c in ("key", "value", "event_time", "side", "number",
                                                    "partition", "offset", "headers")]
            batch = [Record(k, v, t, s, None if n != n else n, p, o, None,  # n != n: NaN, no number
                            _headers(h) if isinstance(h, str) else None)
                     for k, v, t, s, n, p, o, h in zip(*columns)]
            if "count" in frame.columns:
                _add_partials(batch, frame)
            packs = frame["pack"].tolist()
            records += _unpacked(batch, packs) if any(pack is not None for pack in packs) else batch
        read_all = len(records) >= BULK_READ_RECORDS
        stream_time, sequence, directories = self._meta()
        stores = {name: ShardedStore(state, directories[name], read_all) for name, state in self.maps.items()}
        if not read_all:  # what the batch will read, asked for at once
            for name, wanted in self.processor.reads(records).items():
                stores[name].prefetch(wanted)
        state = TaskState(cast(dict[str, MutableMapping[bytes, StoreValue]], stores), stream_time, sequence)
        emitted = run_task(self.processor, state, records)
        for store in stores.values():
            store.write_back()
        self._save_meta(state.stream_time, state.sequence, directories)
        if self.next_tasks is not None:
            return next_stage_rows(emitted, task, self.next_tasks, passed)
        return _frame(emitted, task, passed)

    @collector_paused()
    def handleInitialState(self, key: Any, initialState: pd.DataFrame, timerValues: TimerValues) -> None:
        """A restore (the first batch of a new checkpoint): the task's changelog entries back in
        its stores. Stream time is the newest of their timestamps, as each update carries the
        newest record it holds; what had left a store by its newest is left out."""
        processor = cast(Restorable, self.processor)
        stream_time = int(initialState["timestamp"].max())
        observed = initialState.groupby("store")["timestamp"].max().to_dict()
        directories = {name: self._new_directory(name) for name in self.maps}
        stores = {name: ShardedStore(state, directories[name], False) for name, state in self.maps.items()}
        history = initialState["store"].isin(getattr(processor, "history_stores", ()))
        entries = zip(*(initialState[~history][c].tolist() for c in ("store", "key", "value", "timestamp")))
        for store, store_key, value, ts in entries:
            restored = processor.restored(store, store_key, value, ts, int(observed[store]))
            if restored is not None:
                stores[store][store_key] = restored
        if history.any():  # versioned stores: their whole changelog, put again in its order
            state = TaskState(cast(dict[str, MutableMapping[bytes, StoreValue]], stores), stream_time)
            replayed = initialState[history].sort_values("offset", kind="stable")
            for store, store_key, value, ts in zip(*(replayed[c].tolist() for c in ("store", "key", "value",
                                                                                    "timestamp"))):
                cast(Replayable, processor).replay(state, store, store_key, value, int(ts))
            for index in state.index.values():
                index.save()
        for sharded in stores.values():
            sharded.write_back()
        self._save_meta(stream_time, 0, directories)

    def _meta(self) -> tuple[int, int, dict[str, Directory]]:
        meta = self.meta.get() if self.meta.exists() else None
        stream_time, sequence, saved = meta if meta is not None else (NO_TIME, 0, None)
        found = json.loads(saved) if saved else {}
        return stream_time, sequence, {name: Directory(*found[name]) if name in found else self._new_directory(name)
                                       for name in self.maps}

    def _new_directory(self, store: str) -> Directory:
        """A new store's: hashed without the suffix the processor asks for (its keys' owners)."""
        return Directory(suffix=owner_suffixes(self.processor).get(store, 0))

    def _save_meta(self, stream_time: int, sequence: int, directories: dict[str, Directory]) -> None:
        self.meta.update((stream_time, sequence, json.dumps({n: d.to_list() for n, d in directories.items()})))

    def close(self) -> None:
        pass


def _frame(emitted: list[Emitted], task: int, passed: Sequence[bytes] = ()) -> pd.DataFrame:
    """The emitted records as OUTPUT_SCHEMA's frame of packed rows (kstool.engine.io.packs),
    then the packs passed through; its columns given as numpy arrays: from lists, pandas looks
    at every object to infer a type."""
    import pandas as pd

    def objects(values: list[Any]) -> np.ndarray:
        column = np.empty(len(values), object)
        column[:] = values
        return column

    packs = pack_records([e.role for e in emitted], [e.key for e in emitted], [e.value for e in emitted],
                         np.fromiter((e.timestamp for e in emitted), np.int64, len(emitted)),
                         [e.headers for e in emitted]) + list(passed)
    n = len(packs)
    return pd.DataFrame({"role": objects([PACKED] * n), "key": objects([None] * n), "value": objects([None] * n),
                         "event_time": np.zeros(n, np.int64), "task": np.full(n, task, np.int64), PACK: objects(packs)},
                        columns=OUTPUT_SCHEMA.fieldNames())


def _headers(text: str) -> Headers:
    """A row's headers from their JSON text (kstool.topologies.events.headers_text)."""
    return [{"key": h["key"], "value": None if h.get("value") is None else base64.b64decode(h["value"])}
            for h in json.loads(text)]


def _add_partials(records: list[Record], frame: pd.DataFrame) -> None:
    """The partial of each combined row (null columns: NaN in pandas)."""
    counts = frame["count"].tolist()
    if all(c != c for c in counts):
        return
    windows, latest, ranges = (frame[c].tolist() for c in ("window", "latest", "range"))
    for record, window, count, last, range_start in zip(records, windows, counts, latest, ranges):
        if count == count:
            record.partial = (None if window != window else int(window), int(count), int(last), int(range_start))


def _unpacked(batch: list[Record], packs: list[bytes | None]) -> list[Record]:
    """The rows' records, each pack's in its place (a pack holds one partition's, in offset order)."""
    records: list[Record] = []
    for row, pack in zip(batch, packs):
        if pack is None:
            records.append(row)
            continue
        side, partition = row.side, row.partition
        records += [Record(k, v, t, side, None, partition, o, None, h) for k, v, t, o, h in zip(*unpack(pack))]
    return records


def run_tasks(rows: DataFrame, make_processor: Callable[[], Processor], seed: DataFrame | None = None,
              next_tasks: int | None = None) -> DataFrame:
    """rows: a streaming DataFrame with INPUT_COLUMNS (and PARTIAL_COLUMNS where the source
    combines) -> the emitted records (OUTPUT_SCHEMA), or with `next_tasks` the rows of a next
    stage of that many tasks (kstool.tasks.repartition). seed: a restore's store entries
    (kstool.engine.query.seed.SEED_COLUMNS), applied in the first batch of a new checkpoint;
    a stage takes those of its processor's stores."""
    initial_state = None
    if seed is not None:
        from pyspark.sql import functions as F

        stores = list(task_stores(make_processor()))
        initial_state = seed.filter(F.col("store").isin(stores)).groupBy("task")
    columns = INPUT_COLUMNS + (PARTIAL_COLUMNS if set(PARTIAL_COLUMNS) <= set(rows.columns) else ())
    schema = OUTPUT_SCHEMA if next_tasks is None else STAGE_INPUT_SCHEMA
    return (rows.select(*columns).groupBy("task")
            .transformWithStateInPandas(TaskProcessor(make_processor, next_tasks), schema, "Update", "None",
                                        initialState=initial_state))


def run_stages(rows: DataFrame, make_processor: Callable[[], Staged], tasks: int, seed: DataFrame | None = None) -> DataFrame:
    """run_tasks of a processor of stages: a stateful operator per stage, each stage's output
    the next one's rows over `tasks` tasks (kstool.tasks.repartition)."""
    count = len(make_processor().stages())
    for index in range(count):
        rows = run_tasks(rows, functools.partial(_stage, make_processor, index), seed,
                         next_tasks=tasks if index < count - 1 else None)
    return rows


def _stage(make_processor: Callable[[], Staged], index: int) -> Processor:
    return make_processor().stages()[index]
