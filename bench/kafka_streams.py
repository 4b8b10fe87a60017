"""kstool beside Kafka Streams: `python -m bench.kafka_streams [--steps ...] [--skip-quix]`, and
a step of the full run (#70).

One broker of its own (Apache Kafka), the records loaded once (bench.versus' topics). Each step
runs as kstool `--once` cold (a process of its own, the JVM archive present: a cron run after the
engine's idle exit) and twice through the warm engine (`engine`, then `engine_again`, each a new
app: the second finds the engine's JIT warm for the step's work), and as its Kafka Streams twin
(tests/reference/.../BenchApp.java, a JVM of its own, two stream threads, changelogs on) with
its default record cache (10 MB) and with the cache at 0 (every update written, as kstool writes
them). Processing rate: input records over the seconds from the first input record read to the
last output written (kstool's `processing_seconds`; Kafka Streams' close done, its caches flushed
and offsets committed); wall: the whole command, JVM start included. Before anything else, the
first run on a new machine (a new kstool home with no JVM archive of its own: it maps the one
`kstool engine prepare` recorded at install, which `make bench` runs) of count per key over 2M and
the final windowed count over 1M, beside Quix Streams' wall. Results:
bench/results/kafka-streams-<time>.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from confluent_kafka.admin import AdminClient

from bench.brokers import bench_broker
from bench.measure import cold_env
from bench.runs import cold_start, kstool, machine, quix, run_once, wait_for_jvm_archive, write_results
from bench.versus import STEPS, TOPICS, load_topic
from kstool.contract import DEFAULT_CACHE_MAX_BYTES
from tests.reference_apps import run_bench_app

# kstool's step (bench.versus.STEPS) -> its twin in BenchApp
TWINS = {
    "count_per_key_2m_apps": "count",
    "count_per_key_5m": "count",
    "windowed_count_5m": "tumbling",
    "windowed_count_final_1m": "tumbling-final",
    "hopping_count_1m": "hopping",
    "session_count_1m": "session",
    "stream_stream_join_1m_keys": "stream-stream",
    "stream_table_join_1m_keys": "stream-table",
    "table_table_join_2x1m": "table-table",
}
# the cold target's steps: those over 1M records (a side)
ONE_MILLION = ("windowed_count_final_1m", "hopping_count_1m", "session_count_1m", "stream_stream_join_1m_keys",
               "stream_table_join_1m_keys", "table_table_join_2x1m")
# the first run on a new machine, and Quix Streams' peer of it (bench.runs.quix's arguments)
FIRST_RUNS = {"count_per_key_2m_apps": ("bench-keys-2m-apps", 2_000_000),
              "windowed_count_final_1m": ("bench-keys-1m", 1_000_000, "tumbling-count", "1000")}
KSTOOL_SIDES = ("cold", "engine", "engine_again")
# steps whose kstool topology has a record cache (--statestore-cache-max-bytes): also run cold
# with the cache at 0, beside Kafka Streams' cache-0 run
RECORD_CACHE_STEPS = ("table_table_join_2x1m",)
TARGETS = {
    **{f"{step}_engine_vs_kafka_streams_ratio": (">=", 1.0) for step in TWINS},
    **{f"{step}_cold_wall_vs_kafka_streams_ratio": ("<=", 1.5) for step in ONE_MILLION},  # #86 (#70: 2.0)
    **{f"{step}_first_run_vs_quix_wall_ratio": (">=", 2.0) for step in FIRST_RUNS},
}
CACHES = {"default_cache": DEFAULT_CACHE_MAX_BYTES, "cache_0": 0}  # Kafka Streams' default, as kstool's


def kafka_streams(bootstrap: str, step: str, cache_bytes: int) -> dict:
    """One run of `step`'s Kafka Streams twin over its inputs, as a new application."""
    topic, topology, _ = STEPS[step]
    inputs = [topic, f"{topic}-right"] if topology == "join" else [topic]
    twin, expected = TWINS[step], sum(TOPICS[name][0] for name in inputs)  # the input records it reads
    app = f"bench-ks-{step}-{cache_bytes}-{time.time_ns()}".replace("_", "-")
    with tempfile.TemporaryDirectory(prefix="kstool-bench-ks-") as state:  # its RocksDB stores: ~1 GB for 5M
        result = run_bench_app(twin, bootstrap, app, state, cache_bytes, expected, f"{app}-out", inputs)
    return {**result, "records_per_s": round(result["records"] / result["seconds"])}


def beside(cold: dict, bootstrap: str, master: str, steps: list[str], skip_quix: bool = False) -> dict:
    """Every run of the comparison over loaded topics, `cold`'s home holding a JVM archive
    (bench.runs.cold_start): the first runs first (new homes), then an engine started in
    `cold`'s home, and each step each way."""
    runs: dict = {}
    for step, peer in FIRST_RUNS.items():
        if step in steps:
            topic, topology, options = STEPS[step]
            new_home = {**cold_env("kstool-bench-first-"), "KSTOOL_BOOTSTRAP_SERVERS": bootstrap}
            runs[f"{step}_first_run"] = _say(f"{step} (the first run on a new machine)", run_once, new_home, topic,
                                             f"bench-{step}-first".replace("_", "-"), master, topology, options)
            wait_for_jvm_archive(new_home)  # recorded after the run: not the peer's time
            if not skip_quix:
                runs[f"quix_{step}"] = _say(f"{step} (Quix Streams)", quix, bootstrap, *peer)
    warm = {**cold, "KSTOOL_ENGINE": "on"}
    try:
        runs["engine_start_run"] = _say("the engine's start", run_once, warm, "bench-warmup", "bench-warmup-engine",
                                        master)
        for step in steps:
            topic, topology, options = STEPS[step]
            for side in KSTOOL_SIDES:
                runs[f"{step}_{side}"] = _say(f"{step} ({side})", run_once, cold if side == "cold" else warm, topic,
                                              f"bench-{step}-{side}".replace("_", "-"), master, topology, options)
            if step in RECORD_CACHE_STEPS:
                runs[f"{step}_cold_cache_0"] = _say(f"{step} (cold, cache 0)", run_once, cold, topic,
                                                    f"bench-{step}-cold-cache-0".replace("_", "-"), master, topology,
                                                    (*options, "--statestore-cache-max-bytes", "0"))
            for name, cache_bytes in CACHES.items():
                runs[f"kafka_streams_{step}_{name}"] = _say(f"{step} (Kafka Streams, {name})", kafka_streams,
                                                            bootstrap, step, cache_bytes)
    finally:
        kstool(warm, "engine", "stop")
    return runs


def _say(what: str, run, *args):
    print(f"running {what} ...", file=sys.stderr)
    result = run(*args)
    print(f"  {result}", file=sys.stderr)
    return result


def figures(runs: dict) -> dict:
    """The #70 ratios: kstool's processing rate through the warm engine over Kafka Streams'
    (default cache; the first engine run and the cache-0 peer beside it), kstool's cold wall over
    Kafka Streams' on the 1M steps, and the first run's wall throughput over Quix Streams'."""
    out: dict = {}
    for step in TWINS:
        peer = runs.get(f"kafka_streams_{step}_default_cache")
        if peer is None:
            continue
        for side in KSTOOL_SIDES:
            out[f"{step}_{side}_records_per_s"] = runs[f"{step}_{side}"]["records_per_s"]
        for name in CACHES:
            out[f"kafka_streams_{step}_{name}_records_per_s"] = runs[f"kafka_streams_{step}_{name}"]["records_per_s"]
        out[f"{step}_engine_vs_kafka_streams_ratio"] = round(
            runs[f"{step}_engine_again"]["records_per_s"] / peer["records_per_s"], 2)
        out[f"{step}_first_engine_vs_kafka_streams_ratio"] = round(
            runs[f"{step}_engine"]["records_per_s"] / peer["records_per_s"], 2)
        out[f"{step}_engine_vs_kafka_streams_cache_0_ratio"] = round(
            runs[f"{step}_engine_again"]["records_per_s"] / runs[f"kafka_streams_{step}_cache_0"]["records_per_s"], 2)
        if step in ONE_MILLION:
            out[f"{step}_cold_wall_vs_kafka_streams_ratio"] = round(runs[f"{step}_cold"]["wall_s"] / peer["wall_s"], 2)
        if f"{step}_cold_cache_0" in runs:  # what the record cache gives each, cold against cold
            uncached, cached = runs[f"{step}_cold_cache_0"], runs[f"{step}_cold"]
            out[f"{step}_cold_cache_0_records_per_s"] = uncached["records_per_s"]
            out[f"{step}_cold_cache_speedup"] = round(cached["records_per_s"] / uncached["records_per_s"], 2)
            out[f"{step}_cold_cache_0_vs_kafka_streams_cache_0_ratio"] = round(
                uncached["records_per_s"] / runs[f"kafka_streams_{step}_cache_0"]["records_per_s"], 2)
    for step in FIRST_RUNS:
        first, peer = runs.get(f"{step}_first_run"), runs.get(f"quix_{step}", {})
        if first and "wall_s" in peer:  # the same records, so wall throughput's ratio is the walls' inverse
            out[f"{step}_first_run_vs_quix_wall_ratio"] = round(peer["wall_s"] / first["wall_s"], 2)
    return out


def load_inputs(bootstrap: str, steps: list[str]) -> None:
    """The steps' topics (bench.versus.TOPICS) that the broker does not have yet."""
    topics = {STEPS[step][0] for step in steps}
    topics |= {f"{STEPS[step][0]}-right" for step in steps if STEPS[step][1] == "join"}
    present = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
    for topic in sorted(topics - set(present)):
        load_topic(bootstrap, topic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", default=",".join(TWINS), help="comma-separated: " + ", ".join(TWINS))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-quix", action="store_true")
    args = parser.parse_args()
    steps = args.steps.split(",")
    cold = cold_env("kstool-bench-ks-home-")
    os.chdir(cold["KSTOOL_HOME"])  # not this tree's root: `python -m` would put it first on the path
    results: dict = {"machine": machine("apache-kafka"), "args": vars(args), "runs": {}}
    with bench_broker("apache-kafka", cold) as bootstrap:
        print("loading the inputs ...", file=sys.stderr)
        load_inputs(bootstrap, steps)
        cold_start_run = _say("the JVM archive's recording", cold_start, cold, bootstrap, args.master)
        results["runs"] = {"cold_start_run": cold_start_run,
                           **beside(cold, bootstrap, args.master, steps, args.skip_quix)}
    write_results(results, figures(results["runs"]), prefix="kafka-streams-", targets=TARGETS)


if __name__ == "__main__":
    main()
