"""What the warm engine costs while idle: `python -m bench.engine_idle` (not CI).

On a broker of its own, `--apps` wordcount `--once` apps run through the engine (each parks its
query there), then the engine is left alone for `--idle` seconds: the CPU time its whole process
tree used meanwhile (the engine, its JVM, Spark's Python processes: from /proc, utime + stime),
as a share of one core, and the tree's resident memory and processes by kind, with no app parked
and with them all. Writes bench/results/engine-idle-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from confluent_kafka import Producer

from bench.brokers import add_broker_option, bench_broker
from bench.load import create_topic
from bench.measure import cold_env
from bench.runs import KSTOOL, ROOT, kstool, machine

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(parent pid, CPU ticks used, resident bytes) of a live process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[21]) * PAGE


def tree(root: int) -> dict[int, tuple[int, int]]:
    """Every live process under root (root included): pid -> (CPU ticks, resident bytes)."""
    stats = {pid: s for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()) if (s := _stat(pid))}
    members, grew = {root}, True
    while grew:
        more = {pid for pid, (parent, _, _) in stats.items() if parent in members} - members
        members |= more
        grew = bool(more)
    return {pid: stats[pid][1:] for pid in members if pid in stats}


def kind(pid: int) -> str:
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return "gone"
    text = b" ".join(args).decode(errors="replace")
    for name in ("python_streaming_source_runner", "pyspark.daemon", "pyspark.worker", "kstool.engine.daemon.server",
                 "jvm_reaper"):
        if name in text:
            return name
    return Path(args[0].decode(errors="replace")).name or "other"


def idle_cost(engine_pid: int, seconds: float) -> dict:
    before = tree(engine_pid)
    time.sleep(seconds)
    after = tree(engine_pid)
    kinds = {pid: kind(pid) for pid in after}
    used: Counter[str] = Counter()
    resident: Counter[str] = Counter()
    for pid, (ticks, rss) in after.items():
        used[kinds[pid]] += ticks - before.get(pid, (ticks, 0))[0]
        resident[kinds[pid]] += rss
    return {"idle_s": seconds, "cpu_share_of_one_core": round(sum(used.values()) / TICKS / seconds, 4),
            "resident_mb": round(sum(resident.values()) / 2**20), "processes": dict(Counter(kinds.values())),
            "cpu_share_by_process": {name: round(n / TICKS / seconds, 4) for name, n in used.items()},
            "resident_mb_by_process": {name: round(n / 2**20) for name, n in resident.items()}}


def _feed(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(100):
        producer.produce(topic, value=f"w{i % 7} common".encode())
    assert producer.flush(30) == 0


def _kstool(env: dict, *args: str) -> str:
    done = kstool(env, *args, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"kstool {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=8)
    parser.add_argument("--idle", type=float, default=30.0)
    add_broker_option(parser)
    options = parser.parse_args()
    env = {**cold_env("kstool-bench-idle-"), "KSTOOL_ENGINE": "on"}
    with ExitStack() as stack:
        bootstrap = stack.enter_context(bench_broker(options.broker, env))
        stack.callback(subprocess.run, [*KSTOOL, "engine", "stop"], env=env, capture_output=True)
        create_topic(bootstrap, "lines", 2)
        _feed(bootstrap, "lines")
        _kstool(env, "engine", "start", "--max-parked", str(options.apps))
        engine_pid = json.loads(_kstool(env, "engine", "status", "-o", "json"))["pid"]
        time.sleep(5)  # the engine's start is done
        empty = idle_cost(engine_pid, options.idle)
        for app in range(options.apps):
            _kstool(env, "run", "wordcount", "--input", "lines", "--output", f"counts-{app}", "--app-id", f"wc{app}",
                    "--once")
        parked = json.loads(_kstool(env, "engine", "status", "-o", "json"))["parked"]
        time.sleep(5)  # the last run's batch and commit are done
        loaded = idle_cost(engine_pid, options.idle)
    report = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(options.broker),
              "apps_parked": len(parked), "no_app_parked": empty, "apps_parked_idle": loaded,
              "target": "under 0.01 of a core with 8 parked queries"}
    out = ROOT / "bench" / "results" / f"engine-idle-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    for name, figures in (("no app parked", empty), (f"{len(parked)} apps parked", loaded)):
        print(f"{name:16} {figures['cpu_share_of_one_core'] * 100:5.1f}% of a core, {figures['resident_mb']} MB "
              f"resident, processes {figures['processes']}")
        print(f"{'':16} CPU by process {figures['cpu_share_by_process']}, MB {figures['resident_mb_by_process']}")
    print(f"written: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
