"""What the table aggregation's differential tests share
(tests/streams/test_differential_table_aggregate.py, the fast tier; test_differential_runs.py,
kstool runs): row updates, their values, Kafka Streams' answer (tests/twin.py)."""

from __future__ import annotations

import json
import os

from hypothesis import strategies as st

from tests.streams.differential_windows import header_of

EXAMPLES = int(os.environ.get("KSTOOL_DIFFERENTIAL_EXAMPLES", "200"))
# (row key, None for a tombstone or (group, number), timestamp)
rows = st.lists(st.tuples(st.sampled_from(["r1", "r2", "r3", "r4"]),
                          st.one_of(st.none(), st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-5, 9))),
                          st.integers(0, 40)), max_size=24)
# how the group is read: a JSON field (sums need the number's field too) or a split text field
shapes = st.sampled_from(["split", "field"])


def row_value(shape: str, value: tuple[str, int] | None) -> str | None:
    if value is None:
        return None
    group, number = value
    return f"{group},{number}" if shape == "split" else json.dumps({"g": group, "n": number})


def kafka_streams(twin, shape, agg, suppress_ms, suppress_records, history, inputs) -> list[tuple]:
    """Kafka Streams' output records: (group, value, timestamp, headers); row update i has header_of(i)."""
    case = {"kind": "table-aggregate", "agg": agg, "cache": True, "separator": ",", "index": 0,
            **({"history": history} if history is not None else {}),
            **({"group_field": "g", "sum_field": "n"} if shape == "field" else {}),
            **({"suppress_ms": suppress_ms} if suppress_ms is not None else {}),
            **({"suppress_records": suppress_records} if suppress_records is not None else {}),
            "records": [["input", key, row_value(shape, value), ts, list(header_of(i))]
                        for i, (key, value, ts) in enumerate(inputs)]}
    return [(r["key"], None if r["value"] is None else int(r["value"]), r["timestamp"],
             tuple(tuple(header) for header in r["headers"])) for r in twin.ask(case)]
