"""Processor-level rates of the #39 processors beside the ones they extend, in one Python process
with dict stores (no Kafka, no Spark): records/s over N records in batches of 10,000, as the
engine hands a task its batch. `python -m bench.processors_39 [N]` (figures: bench/README.md)."""

from __future__ import annotations

import json
import random
import sys
import time

from kstool.streams.joins.foreign_key import ForeignKeyJoin
from kstool.streams.joins.global_table import GlobalTableJoin
from kstool.streams.joins.joiners import make_joiner
from kstool.streams.joins.stream_table import StreamTableJoin
from kstool.streams.joins.versioned_stream_table import VersionedStreamTableJoin
from kstool.streams.key_mappers import key_mapper
from kstool.streams.reduce import TextReduce
from kstool.streams.sliding import SlidingWindowAggregate
from kstool.streams.table_aggregation import TableAggregate
from kstool.streams.task import LEFT, RIGHT, Processor, Record, TaskState, run_task, task_stores
from kstool.streams.time_windows import WindowedAggregate
from kstool.streams.windows import WindowSpec

BATCH = 10_000
HOUR = 3_600_000


def _rate(name: str, processor: Processor, records: list[Record]) -> None:
    state = TaskState.empty(task_stores(processor))
    started = time.perf_counter()
    for i in range(0, len(records), BATCH):
        run_task(processor, state, records[i:i + BATCH])
    took = time.perf_counter() - started
    print(f"{name:58s} {len(records) / took:>10,.0f} records/s ({took:.2f} s)")


def main(n: int) -> None:
    rng = random.Random(7)
    keys = [f"k{i}".encode() for i in range(5000)]
    joiner = make_joiner("concat")
    # one record per key and 5 ms, 5,000 keys
    stream = [Record(rng.choice(keys), b"1", i * 5, number=1.0, offset=i) for i in range(n)]
    for name, window, agg in (("windowed count tumbling:1s (batch path)", "tumbling:1s", "count"),
                              ("concat tumbling:1s", "tumbling:1s", "concat")):
        _rate(name, WindowedAggregate(WindowSpec.parse(window), agg, 0, "update"), stream)
    _rate("sliding count sliding:1s (record by record)",
          SlidingWindowAggregate(WindowSpec.parse("sliding:1s"), "count", 0, "update"), stream)
    _rate("concat without windows", TextReduce("concat"), stream)
    # a stream and a table of the same 5,000 keys, interleaved in time
    sides = [Record(rng.choice(keys), b"v", i * 10 + 3 * side, side, offset=i)
             for i in range(n // 2) for side in (LEFT, RIGHT)]
    _rate("stream-table join (the latest row)", StreamTableJoin("left", joiner), sides)
    _rate("stream-table join, versioned table (history 1h)", VersionedStreamTableJoin("left", HOUR, 0, joiner), sides)
    _rate("... with --grace 1s", VersionedStreamTableJoin("left", HOUR, 1000, joiner), sides)
    # orders (50,000 keys) naming one of 5,000 customers, and customer updates, alternating
    orders = []
    for i in range(n):
        if i % 2:
            value = json.dumps({"c": f"k{rng.randrange(5000)}"}).encode()
            orders.append(Record(f"o{rng.randrange(50_000)}".encode(), value, i * 10, LEFT, offset=i))
        else:
            orders.append(Record(rng.choice(keys), b"name", i * 10, RIGHT, offset=i))
    _rate("foreign-key join (left)", ForeignKeyJoin("left", lambda v: json.loads(v)["c"].encode(), joiner), orders)
    _rate("stream-global join (left, a field's key)", GlobalTableJoin("left", key_mapper("field:c"), joiner), orders)
    # 50,000 rows moving between 100 groups
    rows = [Record(f"u{rng.randrange(50_000)}".encode(), f"r{rng.randrange(100)}".encode(), i, offset=i)
            for i in range(n)]
    _rate("table-aggregate count by value", TableAggregate("count", "value"), rows)
    _rate("... with --suppress-time 1s", TableAggregate("count", "value", suppress_ms=1000), rows)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
