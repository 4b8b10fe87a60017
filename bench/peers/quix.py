"""Quix Streams, the Python peer, in its own virtualenv: count per key (stateful, no
changelog), a tumbling-window count emitted when windows close, or an interval join of two
topics. Prints one JSON line: records, seconds from the first to the last record.

usage: quix.py BOOTSTRAP TOPIC EXPECTED STATE_DIR [count | tumbling-count WINDOW_MS |
       interval-join RIGHT_TOPIC WITHIN_MS]
"""

import json
import sys
import time

from quixstreams import Application

bootstrap, topic, expected, state_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
mode = sys.argv[5] if len(sys.argv) > 5 else "count"
marks = {"first": None, "last": None, "seen": 0}

app = Application(
    broker_address=bootstrap,
    consumer_group=f"quix-bench-{int(time.time())}",
    auto_offset_reset="earliest",
    use_changelog_topics=False,
    state_dir=state_dir,
    consumer_extra_config={"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
)


def seen(value):
    """Every input record passes here once, before the stateful step."""
    now = time.perf_counter()
    marks["first"] = marks["first"] or now
    marks["seen"] += 1
    if marks["seen"] >= expected:
        marks["last"] = now
        app.stop()


def count(value, state):
    total = state.get("count", 0) + 1
    state.set("count", total)
    return total


def dataframe(name, values="bytes"):
    return app.dataframe(app.topic(name, key_deserializer="str", value_deserializer=values)).update(seen)


# the interval join keeps values in its state, which takes JSON-serialisable values: text
sdf = dataframe(topic, "str" if mode == "interval-join" else "bytes")
if mode == "count":
    sdf = sdf.apply(count, stateful=True)
elif mode == "tumbling-count":
    sdf = sdf.tumbling_window(int(sys.argv[6])).count().final()
elif mode == "interval-join":
    within = int(sys.argv[7])
    sdf = sdf.join_interval(dataframe(sys.argv[6], "str"), on_merge=lambda left, right: left + "," + right,
                            backward_ms=within, forward_ms=within, grace_ms=2 * within + 1)
else:
    raise SystemExit(f"unknown mode {mode}")
app.run()
print(json.dumps({"records": marks["seen"], "seconds": (marks["last"] or time.perf_counter()) - marks["first"]}))
