"""Soak: `python -m bench.soak` (not CI). Continuous apps fed at a steady rate for minutes, each
SIGKILLed (the driver and its JVM) every minute and started again at once; at the end the feed
stops and a final `--once` run catches up. Reports, per app:

- records in (produced) = records accounted for: wordcount, the sum of the final counts (each
  line holds WORDS words); a windowed count (tumbling 10 s, grace 5 min), the sum of every
  window's final count plus the records dropped as late (its --late-topic);
- the memory (resident, driver and JVM) 40 s into the first and into the last run, and the
  growth between them.

Writes bench/results/soak-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.brokers import add_broker_option, bench_broker
from bench.load import create_topic
from bench.measure import cold_env, tree_rss_bytes
from kstool.kafka.partitioner import partition_for
from tests.faults import kill_tree

ROOT = Path(__file__).resolve().parent.parent
KSTOOL = [sys.executable, "-m", "kstool.commands.main"]
WORDS = 4  # per line
APPS = {
    "wordcount": ("wordcount",),
    "windowed": ("aggregate", "--window", "tumbling:10s", "--grace", "5m", "--late-topic", "soak-windowed-late"),
}


def _feed(bootstrap: str, topic: str, rate: int, stop: threading.Event, sent: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "partitioner": "murmur2_random"})
    started, n = time.monotonic(), 0
    while not stop.is_set():
        due = int((time.monotonic() - started) * rate)
        for _ in range(due - n):
            word = b"w%d" % (n % 1000)
            producer.produce(topic, key=word, value=b" ".join([word, b"x", b"y%d" % (n % 7), b"z"]))
            n += 1
            if n % 1000 == 0:
                producer.poll(0)
        time.sleep(0.01)
    producer.flush(60)
    # the embedded broker's high watermark needs a single-record batch last in each partition;
    # each with a key of that partition (Kafka's murmur2 partitioner, as the feed's), as the
    # per-task windowed count keeps a key's windows in the task of its partition: a key written
    # to two partitions is two aggregates, as in Kafka Streams
    tail = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1})
    for partition in (0, 1):
        word = next(w for w in (b"w%d" % i for i in range(1000)) if partition_for(w, 2) == partition)
        tail.produce(topic, key=word, value=b" ".join([word, b"x", b"y%d" % (n % 7), b"z"]), partition=partition)
        n += 1
    tail.flush(60)
    sent.append(n)


def _read(bootstrap: str, topic: str) -> list:
    """Every record of the topic, read until each partition's end-of-partition signal (a quiet
    poll is no end: the embedded broker may answer empty while it gathers small batches)."""
    partitions = sorted(AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
                        .topics[topic].partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-{time.time()}",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    records, ended, deadline = [], set(), time.monotonic() + 300
    while len(ended) < len(partitions):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: partitions {set(partitions) - ended} did not end within 300 s")
        msg = consumer.poll(1)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                ended.add(msg.partition())
            continue
        records.append(msg)
    consumer.close()
    return records


def soak(env: dict, bootstrap: str, app: str, minutes: float, rate: int, kill_every: float) -> dict:
    topic = f"soak-{app}"
    create_topic(bootstrap, topic, 2)
    args = [*KSTOOL, "run", *APPS[app], "--input", topic, "--output", f"{topic}-out", "--app-id", topic,
            "--trigger", "1s", "--quiet"]
    stop, sent = threading.Event(), []
    feeder = threading.Thread(target=_feed, args=(bootstrap, topic, rate, stop, sent))
    feeder.start()
    ends = time.monotonic() + minutes * 60
    rss: list[int] = []
    kills = 0
    while time.monotonic() < ends:
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run_ends = min(time.monotonic() + kill_every, ends)
        time.sleep(min(40, max(run_ends - time.monotonic(), 0)))
        rss.append(tree_rss_bytes(proc.pid))
        time.sleep(max(run_ends - time.monotonic(), 0))
        if proc.poll() is not None:
            raise RuntimeError(f"{app}: the run ended by itself (exit {proc.returncode})")
        kill_tree(proc)
        kills += 1
    stop.set()
    feeder.join()
    started = time.monotonic()
    final = subprocess.run([*args, "--once"], env=env, capture_output=True, text=True)
    if final.returncode != 0:
        raise RuntimeError(f"{app}: final run failed: {final.stderr.strip()[-500:]}")
    latest = {m.key(): m.value() for m in _read(bootstrap, f"{topic}-out")}
    counts = [int.from_bytes(v, "big", signed=True) for v in latest.values()]
    late = len(_read(bootstrap, "soak-windowed-late")) if app == "windowed" else 0
    produced = sent[0]
    accounted = (sum(counts) // WORDS if app == "wordcount" else sum(counts)) + late
    return {"records_in": produced, "records_accounted_for": accounted, "equal": produced == accounted,
            "late": late,
            "kills": kills, "catch_up_s": round(time.monotonic() - started, 1),
            "rss_first_mb": round(rss[0] / 2**20), "rss_last_mb": round(rss[-1] / 2**20),
            "rss_growth": round(rss[-1] / rss[0] - 1, 3), "rss_samples_mb": [round(r / 2**20) for r in rss]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--rate", type=int, default=5000, help="records/s")
    parser.add_argument("--kill-every", type=float, default=60, help="seconds")
    parser.add_argument("--apps", default=",".join(APPS))
    add_broker_option(parser)
    args = parser.parse_args()
    env = cold_env("kstool-soak-")
    brokers = ExitStack()
    bootstrap = brokers.enter_context(bench_broker(args.broker, env))
    results: dict = {"args": vars(args), "runs": {}}
    try:
        for app in args.apps.split(","):
            print(f"soak {app}: {args.minutes:g} min at {args.rate}/s, SIGKILL every {args.kill_every:g}s",
                  file=sys.stderr)
            results["runs"][app] = soak(env, bootstrap, app, args.minutes, args.rate, args.kill_every)
            print(json.dumps(results["runs"][app]), file=sys.stderr)
    finally:
        brokers.close()
    out = ROOT / "bench" / "results" / f"soak-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(out)


if __name__ == "__main__":
    main()
