"""What the joins' differential tests share (tests/streams/test_differential_joins.py, the fast
tier; test_differential_runs.py, kstool runs): inputs, join kinds, Kafka Streams' answer
(tests/twin.py), and what the comparisons look at."""

from __future__ import annotations

import os

from hypothesis import strategies as st

from kstool.streams.task import LEFT, RIGHT, Record, processing_order

EXAMPLES = int(os.environ.get("KSTOOL_DIFFERENTIAL_EXAMPLES", "200"))
KEYS = ["a", "b", "c"]
SIDES = {"left": LEFT, "right": RIGHT}
# (side, key (None: none), value: None for a tombstone, else a number and the key it names, timestamp)
records = st.lists(st.tuples(st.sampled_from(["left", "right"]), st.sampled_from([*KEYS, None]),
                             st.one_of(st.none(), st.tuples(st.integers(0, 9), st.sampled_from(KEYS))),
                             st.integers(0, 40)), max_size=24)
joins = st.sampled_from([("stream-stream", h) for h in ("inner", "left", "outer")]
                        + [("stream-table", h) for h in ("inner", "left")]
                        + [("versioned-stream-table", h) for h in ("inner", "left")]
                        + [("table-table", h) for h in ("inner", "left", "outer")]
                        + [("stream-global", h) for h in ("inner", "left")]
                        + [("foreign-key", h) for h in ("inner", "left")]
                        + [("versioned-foreign-key", h) for h in ("inner", "left")])
TABLE_OUTPUTS = ("table-table", "foreign-key", "versioned-foreign-key")  # KTables: a batch keeps a key's latest result


def table_history(before: int, grace: int) -> int:
    """A versioned table's history (--table-history): from the drawn numbers, never below the
    grace (Kafka Streams refuses a grace longer than the history)."""
    return grace + 3 * before


def value_of(value: tuple[int, str] | None) -> str | None:
    return None if value is None else f"{value[0]},{value[1]}"


def header_of(side: str, key: str | None, value: tuple[int, str] | None, ts: int) -> str:
    """The header each input record carries (`n`): what it is, so that an output record's
    header names the input record Kafka Streams forwarded it from (records alike: alike)."""
    return f"{side}|{key}|{value_of(value)}|{ts}"


def kafka_streams(twin, kind, how, before, after, grace, inputs) -> list[tuple]:
    """Kafka Streams' output records: (key, value, timestamp, the `n` headers they carry)."""
    versioned = {"kind": kind.removeprefix("versioned-"), "history": table_history(before, grace)} \
        if kind.startswith("versioned") else {}
    answer = twin.ask({"kind": kind, "how": how, "before": before, "after": after, "grace": grace,
                       "separator": ",", "index": 1, "cache": True, **versioned,
                       "records": [[side, key, value_of(value), ts, [["n", header_of(side, key, value, ts)]]]
                                   for side, key, value, ts in inputs]})
    return [(r["key"], r["value"], r["timestamp"], tuple(value for _, value in r["headers"])) for r in answer]


def in_processing_order(inputs: list[tuple], batch: int) -> list[tuple]:
    """Each micro-batch's records in Kafka Streams' order within a task (the side whose next
    record is older goes first), as kstool processes a batch."""
    ordered = []
    for start in range(0, len(inputs), batch):
        chunk = [Record(None, None, ts, SIDES[side], offset=start + i)
                 for i, (side, _, _, ts) in enumerate(inputs[start:start + batch])]
        ordered += [inputs[record.offset] for record in processing_order(chunk)]
    return ordered


def latest(rows: list[tuple]) -> dict[str, str]:
    """A table join's result per key after the last update (a tombstone: none)."""
    latest = {key: value for key, value, *_ in rows}
    return {key: value for key, value in latest.items() if value is not None}


def has_null_side(row: tuple) -> bool:
    """A result of one side: "v,k" + "," + "null" or "null" + "," + "v,k"."""
    return row[1].startswith("null,") or row[1].endswith(",null")
