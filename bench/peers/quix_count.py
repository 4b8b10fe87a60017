"""Quix Streams counting per key (stateful, no changelog): the Python peer. Runs in its own
virtualenv. Prints one JSON line: records, seconds from the first to the last record."""

import json
import sys
import time

from quixstreams import Application

bootstrap, topic, expected, state_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
marks = {"first": None, "last": None, "seen": 0}

app = Application(
    broker_address=bootstrap,
    consumer_group=f"quix-bench-{int(time.time())}",
    auto_offset_reset="earliest",
    use_changelog_topics=False,
    state_dir=state_dir,
    consumer_extra_config={"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
)


def count(value, state):
    total = state.get("count", 0) + 1
    state.set("count", total)
    now = time.perf_counter()
    marks["first"] = marks["first"] or now
    marks["seen"] += 1
    if marks["seen"] >= expected:
        marks["last"] = now
        app.stop()
    return total


sdf = app.dataframe(app.topic(topic, key_deserializer="str", value_deserializer="bytes"))
sdf = sdf.apply(count, stateful=True)
app.run()
print(json.dumps({"records": marks["seen"], "seconds": (marks["last"] or time.perf_counter()) - marks["first"]}))
