"""The warm engine's one-liners: `python -m bench.engine` (not CI).

On a broker of its own (Apache Kafka; `--broker embedded`: kstool's), for each one-liner: one earlier run of it (the app exists, the
JVM class-data archive is written), then `--rounds` timed runs over 100 new records each, first
without the engine (`--no-engine`), then as typed: the first of those starts the engine (#36:
no `engine start` typed; its wall time is reported against the runs without the engine), the
later ones use it. Wall time of the whole kstool command, as cron or a shell sees it; the
median is reported, and the targets of issues #23 and #36 checked against the engine column.
Then a cron-style job (#36): count per key over `--cron-records` new records (a default
producer's, 5,000 keys) each run, its second run through the engine against Quix Streams over
the same records in the same run (skipped with --skip-quix). Writes
bench/results/engine-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from confluent_kafka import Producer

from bench.brokers import add_broker_option, bench_broker
from bench.load import create_topic, keyed_records, load_as_apps_do
from bench.measure import scratch_dir
from bench.runs import wait_for_jvm_archive

ROOT = Path(__file__).resolve().parent.parent
KSTOOL = [sys.executable, "-m", "kstool.commands.main"]
T0 = 1_767_225_600_000
RECORDS = 100
# name: (target seconds with the engine, inputs, the command without --no-engine)
ONE_LINERS = {
    "wordcount --once": (2.0, ["lines"], ["run", "wordcount", "--input", "lines", "--output", "counts",
                                          "--app-id", "wc", "--once"]),
    "windowed aggregate --once": (3.0, ["clicks"], ["run", "aggregate", "--input", "clicks", "--output",
                                                    "per-10s", "--window", "tumbling:10s", "--app-id", "agg",
                                                    "--once"]),
    "stream-stream join --once": (3.0, ["left", "right"], ["run", "join", "--left", "left", "--right", "right",
                                                           "--kind", "stream-stream", "--within", "10s",
                                                           "--output", "joined", "--app-id", "ssj", "--once"]),
    "state get": (1.0, [], ["state", "get", "common", "--app-id", "wc"]),
}


def _kstool(env: dict, *args: str) -> float:
    started = time.monotonic()
    proc = subprocess.run([*KSTOOL, *args], env=env, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"kstool {' '.join(args)} failed: {proc.stderr.strip()}")
    return wall


def _feed(bootstrap: str, topics: list[str], round_no: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1})
    for topic in topics:
        for i in range(RECORDS):
            key = f"k{i % 10}".encode()
            value = f"w{i % 17} common w{round_no}".encode()
            producer.produce(topic, key=key, value=value, timestamp=T0 + round_no * 60_000 + i * 100)
    assert producer.flush(30) == 0


def cron_job(env: dict, bootstrap: str, records: int) -> dict:
    """Two runs of a count per key, each over `records` new records; the second one's whole
    command against Quix Streams over the same records (a topic of their own)."""
    from bench.runs import quix

    args = ["run", "aggregate", "--agg", "count", "--input", "cron-input", "--output", "cron-counts",
            "--app-id", "cron", "--once"]
    for topic in ("cron-input", "cron-peer"):
        create_topic(bootstrap, topic, 2)
    load_as_apps_do(bootstrap, "cron-input", keyed_records(records, keys=5_000, seed=4))
    first = _kstool(env, *args)
    for topic in ("cron-input", "cron-peer"):  # the same records for both
        load_as_apps_do(bootstrap, topic, keyed_records(records, keys=5_000, seed=7))
    second = _kstool(env, *args)
    peer = quix(bootstrap, "cron-peer", records)
    ratio = round(peer["wall_s"] / second, 2) if "wall_s" in peer else None
    return {"records_per_run": records, "first_run_s": round(first, 2), "second_run_s": round(second, 2),
            "quix": peer, "quix_wall_vs_second_run": ratio, "target_ratio": 5.0,
            "met": ratio is not None and ratio >= 5.0}


def measure(env: dict, bootstrap: str, rounds: int, engine: bool) -> dict[str, list[float]]:
    walls: dict[str, list[float]] = {name: [] for name in ONE_LINERS}
    extra = [] if engine else ["--no-engine"]
    for round_no in range(rounds):
        for name, (_, inputs, args) in ONE_LINERS.items():
            _feed(bootstrap, inputs, round_no + (100 if engine else 0))
            walls[name].append(round(_kstool(env, *args, *extra), 3))
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cron-records", type=int, default=2_000_000)
    parser.add_argument("--skip-quix", action="store_true", help="no cron-style job against Quix Streams")
    add_broker_option(parser)
    options = parser.parse_args()
    home = scratch_dir("kstool-bench-engine-")
    env = {**os.environ, "KSTOOL_HOME": home, "KSTOOL_ENGINE": "on"}
    env.pop("KSTOOL_BOOTSTRAP_SERVERS", None)
    brokers = ExitStack()
    bootstrap = brokers.enter_context(bench_broker(options.broker, env))
    try:
        for topic in ("lines", "clicks", "left", "right"):
            create_topic(bootstrap, topic, 2)
        for _, inputs, args in ONE_LINERS.values():  # the earlier run of each
            _feed(bootstrap, inputs, 99)
            _kstool(env, *args, "--no-engine")
        wait_for_jvm_archive(env)
        without = measure(env, bootstrap, options.rounds, engine=False)
        first_runs = {}
        for name, (_, inputs, args) in ONE_LINERS.items():  # the first starts the engine
            _feed(bootstrap, inputs, 98)
            first_runs[name] = round(_kstool(env, *args), 3)
        with_engine = measure(env, bootstrap, options.rounds, engine=True)
        cron = None if options.skip_quix else cron_job(env, bootstrap, options.cron_records)
        _kstool(env, "engine", "stop")
    finally:
        subprocess.run([*KSTOOL, "engine", "stop"], env=env, capture_output=True)
        brokers.close()
    results = {}
    for name, (target, _, _) in ONE_LINERS.items():
        engine_s = statistics.median(with_engine[name])
        results[name] = {"without_engine_median_s": statistics.median(without[name]),
                         "with_engine_median_s": engine_s, "target_with_engine_s": target,
                         "met": engine_s <= target, "without_engine_s": without[name],
                         "with_engine_s": with_engine[name]}
    starting = next(iter(ONE_LINERS))
    autostart = {"one_liner": starting, "starting_the_engine_s": first_runs[starting],
                 "without_engine_median_s": results[starting]["without_engine_median_s"],
                 "ratio": round(first_runs[starting] / results[starting]["without_engine_median_s"], 2),
                 "target_ratio": 1.1, "later_first_runs_s": first_runs}
    autostart["met"] = autostart["ratio"] <= autostart["target_ratio"]
    report = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": platform.node(),
              "cpus": os.cpu_count(), "python": platform.python_version(), "records_per_run": RECORDS,
              "rounds": options.rounds, "results": results, "first_run_starting_the_engine": autostart,
              "cron_job": cron}
    out = ROOT / "bench" / "results" / f"engine-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'one-liner':28} {'without':>9} {'with engine':>12} {'target':>7}")
    for name, row in results.items():
        print(f"{name:28} {row['without_engine_median_s']:8.2f}s {row['with_engine_median_s']:11.2f}s "
              f"{row['target_with_engine_s']:6.1f}s {'met' if row['met'] else 'MISSED'}")
    print(f"first {starting} starting the engine: {autostart['starting_the_engine_s']:.2f}s, "
          f"{autostart['ratio']}x a run without it (target <= 1.1x: {'met' if autostart['met'] else 'MISSED'})")
    if cron is not None:
        print(f"cron-style count per key, {cron['records_per_run']:,} new records a run: second run "
              f"{cron['second_run_s']}s, Quix Streams {cron['quix'].get('wall_s')}s: "
              f"{cron['quix_wall_vs_second_run']}x (target >= 5x: {'met' if cron['met'] else 'MISSED'})")
    print(f"written: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
