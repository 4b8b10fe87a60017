"""Stages of tasks in one query, as Kafka Streams' sub-topologies joined by repartition topics:
a stage's task sends the records it emits as REPARTITION to the next stage's task of their key
(Kafka's partitioner over the key, as the repartition topic's producer would), and the rest of
what it emitted (its changelogs) through the next stage's task of its own number, which passes
them on, unopened, to the sink or the stage after it (side PASS_THROUGH). The rows are the next
stage's input (kstool.tasks.processor.INPUT_COLUMNS), packed (kstool.tasks.combiners.packs);
a pack's records keep the sending task as their partition and their place in its batch as their
offset, so the receiving task merges its senders as a repartition topic's partition would."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import BinaryType, DoubleType, IntegerType, LongType, StringType, StructField, StructType

from kstool.contract import REPARTITION
from kstool.engine import PACK_BYTES, ipc, pack_records, pieces
from kstool.kafka.partitioner import partitions_for
from kstool.streams.task import Emitted
from kstool.tasks.combiners.packs import PACK_SCHEMA

if TYPE_CHECKING:
    import pandas as pd

PASS_THROUGH = -1  # a row's side: the sending task's sink records, for the sink
STAGE_INPUT_SCHEMA = StructType([
    StructField("task", IntegerType(), False), StructField("side", IntegerType(), False),
    StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("number", DoubleType()),
    StructField("event_time", LongType(), False), StructField("partition", IntegerType(), False),
    StructField("offset", LongType(), False), StructField("pack", BinaryType()), StructField("headers", StringType()),
])


def next_stage_rows(emitted: list[Emitted], task: int, tasks: int, passed: Sequence[bytes] = ()) -> pd.DataFrame:
    """What task `task` emitted, as rows of the next stage's `tasks` tasks; `passed`: packs an
    earlier stage's task of this number sent through it, passed on."""
    import pandas as pd

    sent = [e for e in emitted if e.role == REPARTITION]
    rows: list[tuple[Any, ...]] = []
    if sent:
        keys = [e.key or b"" for e in sent]
        targets = partitions_for(keys, tasks)
        records = pa.record_batch([pa.array(keys, pa.binary()), pa.array([e.value for e in sent], pa.binary()),
                                   pa.array([e.timestamp for e in sent], pa.int64()),
                                   pa.array(np.arange(len(sent), dtype=np.int64)),
                                   pa.array([e.headers for e in sent], PACK_SCHEMA.field("headers").type)],
                                  schema=PACK_SCHEMA)
        for target in np.unique(targets).tolist():
            for piece in pieces(records.filter(pa.array(targets == target)), PACK_BYTES):
                times, offsets = piece.column("timestamp"), piece.column("offset")
                rows.append((target, 0, pc.max(times).as_py(), task, offsets[-1].as_py(), ipc(piece)))
    rows += [(task, PASS_THROUGH, 0, task, 0, pack) for pack in passed]  # the earlier stage's first
    kept = [e for e in emitted if e.role != REPARTITION]
    if kept:
        times = np.fromiter((e.timestamp for e in kept), np.int64, len(kept))
        rows += [(task, PASS_THROUGH, 0, task, 0, pack) for pack in pack_records(
            [e.role for e in kept], [e.key for e in kept], [e.value for e in kept], times, [e.headers for e in kept])]
    frame = pd.DataFrame(rows, columns=["task", "side", "event_time", "partition", "offset", "pack"])
    for column in ("key", "value", "headers"):  # the records are in the packs
        frame[column] = None
    frame["number"] = np.nan
    return frame[STAGE_INPUT_SCHEMA.fieldNames()].astype({"task": "int32", "side": "int32", "event_time": "int64",
                                                          "partition": "int32", "offset": "int64"})
