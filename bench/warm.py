"""The stateful steps of #35 cold and through the warm engine, Quix Streams beside them:
`python -m bench.warm [--steps windowed_count_5m,...] [--skip-quix]` (not CI).

One broker of its own (Apache Kafka; `--broker embedded`: kstool's), the records loaded once (bench.versus' topics). A small cold run
records the JVM's class-data archive (as an operator's first run does) and a small run starts
the engine, neither counted; then each step runs cold (a process of its own: Spark start and
first-batch warm-up included) and twice through the engine (`engine`, then `engine_again`: the
query's start is included, Spark's and the Python workers' are not; the second finds the JVM's
code compiled for the step's work), each as a new app over the same records. Quix Streams
3.28.1 runs the peers of the count per key (2M records written as applications write them), the
windowed final count and the stream-stream join (its interval join) in the same run. Results:
bench/results/warm-<time>.json (processing records/s and whole-command wall time per side; the
peer's wall time against each).
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack

from bench.brokers import add_broker_option, bench_broker
from bench.measure import cold_env
from bench.runs import cold_start, kstool, machine, quix, run_once, write_results
from bench.versus import STEPS, load_topic

PEERS = {"count_per_key_2m_apps": ("bench-keys-2m-apps", 2_000_000),
         "windowed_count_final_1m": ("bench-keys-1m", 1_000_000, "tumbling-count", "1000"),
         "stream_stream_join_1m_keys": ("bench-join", 2_000_000, "interval-join", "bench-join-right", "60000")}
DEFAULT_STEPS = ("count_per_key_2m_apps", "windowed_count_5m", "windowed_count_final_1m", "hopping_count_1m", "session_count_1m",
                 "stream_table_join_1m_keys", "stream_stream_join_1m_keys", "table_table_join_1m_keys")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", default=",".join(DEFAULT_STEPS), help="comma-separated: " + ", ".join(STEPS))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-quix", action="store_true")
    add_broker_option(parser)
    args = parser.parse_args()
    steps = args.steps.split(",")
    cold = cold_env("kstool-bench-warm-")
    os.chdir(cold["KSTOOL_HOME"])  # not this tree's root: `python -m` would put it first on the path
    brokers = ExitStack()
    bootstrap = brokers.enter_context(bench_broker(args.broker, cold))
    warm = {**cold, "KSTOOL_ENGINE": "on"}
    # through the engine twice, each a new app: the first finds the engine's JIT cold for the step's work
    sides = (("cold", cold), ("engine", warm), ("engine_again", warm))
    results: dict = {"machine": machine(args.broker), "args": vars(args), "runs": {}}
    figures: dict = {}
    runs = results["runs"]
    try:
        for topic in sorted({STEPS[s][0] for s in steps} | {STEPS[s][0] + "-right" for s in steps
                                                             if STEPS[s][1] == "join"}):
            load_topic(bootstrap, topic)
        # the first cold run leaves the JVM's class-data archive to record: not a step's
        print("recording the JVM archive ...", file=sys.stderr)
        runs["cold_start_run"] = cold_start(cold, bootstrap, args.master)
        print("starting the engine ...", file=sys.stderr)
        runs["engine_start_run"] = run_once(warm, "bench-warmup", "bench-warmup-engine", args.master)
        for step in steps:
            topic, topology, options = STEPS[step]
            for side, env in sides:
                print(f"running {step} ({side}) ...", file=sys.stderr)
                run = run_once(env, topic, f"bench-{step}-{side}".replace("_", "-"), args.master, topology, options)
                runs[f"{step}_{side}"] = run
                figures[f"{step}_{side}_records_per_s"] = run["records_per_s"]
                print(f"  {run}", file=sys.stderr)
            if step in PEERS and not args.skip_quix:
                print(f"running Quix Streams' {step} ...", file=sys.stderr)
                peer = runs[f"quix_{step}"] = quix(bootstrap, *PEERS[step])
                print(f"  {peer}", file=sys.stderr)
                if "wall_s" in peer:
                    for side, _ in sides:
                        figures[f"{step}_{side}_vs_quix_wall"] = round(peer["wall_s"] / runs[f"{step}_{side}"]["wall_s"], 2)
    finally:
        kstool(warm, "engine", "stop")
        brokers.close()
    write_results(results, figures, prefix="warm-")


if __name__ == "__main__":
    main()
