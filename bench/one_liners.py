"""kstool's one-liners beside kcat: `python -m bench.one_liners` (not CI).

On a broker of its own, the same records for each (a topic of `--records` keyed records over 2
partitions, written in large batches), in the same run, each the whole command into /dev/null:
`kstool consume -e -o jsonl` against `kcat -C -e -J`, `kstool consume -e -f '%k %s\\n'` against
`kcat -C -e -f '%k %s\\n'`, and `kstool produce` of `--lines` text lines against `kcat -P` (each
read back and counted), each beside the raw confluent-kafka loop (the floor). Writes
bench/results/one-liners-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from contextlib import ExitStack

from bench.brokers import add_broker_option, bench_broker
from bench.load import create_topic, keyed_records, load
from bench.measure import cold_env
from bench.runs import KSTOOL, ROOT, ceiling, machine, raw_produce

FORMAT = "%k %s\\n"
TARGETS = {"consume_jsonl": 1.0, "consume_format": 1.0, "produce": 0.8}  # kstool's throughput / kcat's (#70)


def _timed(args: list[str], env: dict, stdin: bytes | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(args, env=env, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.decode(errors='replace').strip()}")
    return seconds


def _count(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count"})
    partitions = consumer.list_topics(topic).topics[topic].partitions
    marks = [consumer.get_watermark_offsets(TopicPartition(topic, p)) for p in partitions]
    consumer.close()
    return sum(high - low for low, high in marks)


def _rate(records: int, seconds: float) -> dict:
    return {"seconds": round(seconds, 2), "records_per_s": round(records / seconds)}


def consume_vs_kcat(env: dict, bootstrap: str, topic: str, records: int) -> dict:
    """Reading `topic` (`records` records over 2 partitions) whole, into /dev/null."""
    kcat = _kcat()
    return {
        "raw_confluent_kafka_loop": ceiling(bootstrap, topic, 2, records),
        "kcat_json": _rate(records, _timed([kcat, "-b", bootstrap, "-C", "-t", topic, "-e", "-q", "-J"], env)),
        "kstool_jsonl": _rate(records, _timed([*KSTOOL, "consume", topic, "-e", "-o", "jsonl"], env)),
        "kcat_format": _rate(records, _timed([kcat, "-b", bootstrap, "-C", "-t", topic, "-e", "-q", "-f", FORMAT], env)),
        "kstool_format": _rate(records, _timed([*KSTOOL, "consume", topic, "-e", "-f", FORMAT], env)),
    }


def produce_vs_kcat(env: dict, bootstrap: str, lines: int) -> dict:
    """Writing `lines` text lines to a topic of its own each, then reading each back."""
    kcat = _kcat()
    texts = [b"line-%d some words here" % i for i in range(lines)]
    data = b"\n".join(texts) + b"\n"
    for topic in ("by-kstool", "by-kcat", "by-loop"):
        create_topic(bootstrap, topic, 2)
    rates = {
        "raw_confluent_kafka_loop": _rate(lines, raw_produce(bootstrap, "by-loop", texts)),
        "kcat": _rate(lines, _timed([kcat, "-b", bootstrap, "-P", "-t", "by-kcat"], env, data)),
        "kstool": _rate(lines, _timed([*KSTOOL, "produce", "by-kstool"], env, data)),
    }
    return {**rates, "read_back": {topic: _count(bootstrap, topic) for topic in ("by-kstool", "by-kcat", "by-loop")}}


def ratios_to_kcat(consume: dict, produce: dict) -> dict:
    ratios = {"consume_jsonl": consume["kstool_jsonl"]["records_per_s"] / consume["kcat_json"]["records_per_s"],
              "consume_format": consume["kstool_format"]["records_per_s"] / consume["kcat_format"]["records_per_s"],
              "produce": produce["kstool"]["records_per_s"] / produce["kcat"]["records_per_s"]}
    return {name: round(ratio, 2) for name, ratio in ratios.items()}


def _kcat() -> str:
    kcat = shutil.which("kcat")
    if kcat is None:
        raise SystemExit("kcat is not installed (Debian: apt-get install kcat)")
    return kcat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--lines", type=int, default=1_000_000)
    add_broker_option(parser)
    options = parser.parse_args()
    _kcat()
    env = cold_env("kstool-bench-one-liners-")
    with ExitStack() as stack:
        bootstrap = stack.enter_context(bench_broker(options.broker, env))
        create_topic(bootstrap, "records", 2)
        load(bootstrap, "records", keyed_records(options.records), 2)
        consume = consume_vs_kcat(env, bootstrap, "records", options.records)
        produce = produce_vs_kcat(env, bootstrap, options.lines)
    ratios = ratios_to_kcat(consume, produce)
    report = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(options.broker),
              "records": options.records, "lines": options.lines, "consume": consume, "produce": produce,
              "ratios_to_kcat": ratios, "targets": TARGETS, "met": {k: ratios[k] >= TARGETS[k] for k in TARGETS}}
    out = ROOT / "bench" / "results" / f"one-liners-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    for step, figures in (("consume", consume), ("produce", produce)):
        for who, rate in figures.items():
            if "records_per_s" in rate:
                print(f"{step:8} {who:26} {rate['records_per_s']:>10,} records/s ({rate['seconds']} s)")
    for name, ratio in ratios.items():
        print(f"{name:15} {ratio:.2f}x kcat (target >= {TARGETS[name]}x: {'met' if ratio >= TARGETS[name] else 'MISSED'})")
    print(f"read back: {produce['read_back']}; written: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
