"""Continuous mode, end to end: records are produced at a steady rate while an app runs with
`--trigger 100ms`; every 100 ms one record carries a unique marker (a word for wordcount, a key
for the others); latency = when the marker's result is in the output topic - when it was
produced (p50/p99). The figures are the steady state: the markers sent after the first
`warmup` seconds at the rate. A new app's JVM is still compiling Spark's per-batch code then
(its first batches take two to three times as long: bench/README.md, "Continuous latency: an
app's first seconds"), so the markers of those seconds are reported apart (`start_p50_s`,
`start_p99_s`), not dropped.

Apps: wordcount; a windowed count (`aggregate --window tumbling:1s`, every update emitted);
a stream-table join (`--how left`, so every stream record has a result) against a table of the
filler keys loaded first."""

from __future__ import annotations

import subprocess
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.load import create_topic
from bench.measure import percentile

PARTITIONS = 2
FILLER_KEYS = 5000
# app -> its topology arguments (inputs and output added here)
APPS = {
    "wordcount": ("wordcount",),
    "windowed": ("aggregate", "--window", "tumbling:1s"),
    "stream_table_join": ("join", "--kind", "stream-table", "--how", "left"),
}
LABELS = {"wordcount": "wordcount", "windowed": "windowed count", "stream_table_join": "stream-table join"}


def step_name(app: str) -> str:
    """An app's step and figure name in the full bench (wordcount's came first, unsuffixed)."""
    return "latency" if app == "wordcount" else f"latency_{app}"


def _record(app: str, name: bytes) -> tuple[bytes | None, bytes]:
    """(key, value) of a record named `name` (a marker or a filler key)."""
    if app == "wordcount":
        return None, name if name.startswith(b"m") else name + b" filler words here"
    return name, b"1"


def app_id_of(app: str) -> str:
    """The app's id and input topic (the output and table topics take suffixes)."""
    return f"bench-latency-{app.replace('_', '-')}"


def latency(kstool: list[str], env, bootstrap: str, rate: int, seconds: int, app: str = "wordcount",
            warmup: int = 15, app_id: str | None = None) -> dict:
    """app_id: in place of app_id_of(app) where each run must be a new app (runs through one engine)."""
    topic = app_id or app_id_of(app)
    create_topic(bootstrap, topic, PARTITIONS)
    args = [*APPS[app], "--input", topic]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    if app == "stream_table_join":
        create_topic(bootstrap, f"{topic}-table", PARTITIONS)
        for i in range(FILLER_KEYS):
            producer.produce(f"{topic}-table", key=b"f%d" % i, value=b"row%d" % i)
        producer.flush(30)
        args = [*APPS[app], "--left", topic, "--right", f"{topic}-table"]
    runner = subprocess.Popen([*kstool, "run", *args, "--output", f"{topic}-out", "--app-id", topic,
                               "--trigger", "100ms", "--quiet"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sent: dict[bytes, float] = {}
    seen: dict[bytes, float] = {}
    stop = threading.Event()

    def marker_of(key: bytes | None) -> bytes | None:
        # output keys: the word, the stream key, or a windowed key (key ‖ 8-byte window start)
        if not key or not key.startswith(b"m"):
            return None
        return key[:-8] if app == "windowed" else key

    def watch():
        # no broker long-poll on the watcher: its own fetch wait would count as app latency
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-watch",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 5})
        while True:
            try:
                consumer.assign([TopicPartition(f"{topic}-out", p, 0) for p in range(PARTITIONS)])
                break
            except Exception:
                time.sleep(0.2)
        while not stop.is_set():
            for msg in consumer.consume(1000, 0.1):
                marker = marker_of(msg.key()) if msg.error() is None else None
                if marker:
                    seen.setdefault(marker, time.perf_counter())
        consumer.close()

    def send(name: bytes) -> None:
        key, value = _record(app, name)
        producer.produce(topic, key=key, value=value)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        deadline = time.perf_counter() + 180  # wait for the app: a warm-up marker must come out
        while b"mwarmup" not in seen and time.perf_counter() < deadline:
            send(b"mwarmup")
            producer.flush(5)
            time.sleep(1)
        seen.clear()
        tick, seq, started = 0.01, 0, time.perf_counter()
        steady = started + warmup
        while time.perf_counter() - steady < seconds:
            for i in range(max(1, rate // 100)):
                send(b"f%d" % ((seq * 100 + i) % FILLER_KEYS))
            if seq % 10 == 0:
                marker = b"m%d" % seq
                send(marker)
                sent[marker] = time.perf_counter()
            producer.poll(0)
            seq += 1
            time.sleep(max(0.0, started + seq * tick - time.perf_counter()))
        producer.flush(10)
        time.sleep(5)
    finally:
        stop.set()
        runner.terminate()
        runner.wait(60)
        watcher.join(5)
    lags = {m: seen[m] - t for m, t in sent.items() if m in seen}
    start = [lag for m, lag in lags.items() if sent[m] < steady]
    after = [lag for m, lag in lags.items() if sent[m] >= steady]

    def quantile(values: list[float], q: float) -> float:
        return round(percentile(values, q) or -1, 3)

    return {"app": app, "rate": rate, "seconds": seconds, "warmup_s": warmup, "markers": len(sent),
            "seen": len(lags), "p50_s": quantile(after, 50), "p99_s": quantile(after, 99),
            "start_p50_s": quantile(start, 50), "start_p99_s": quantile(start, 99)}
