"""This tree against another kstool checkout on the same records, step by step in one run.

    git worktree add /tmp/kstool-base <commit>
    .venv/bin/python -m bench.versus --base /tmp/kstool-base [--this DIR] [--steps windowed_count_5m,...] [--engine 3]

One broker of its own (Apache Kafka; `--broker embedded`: kstool's), the records loaded once; each step runs with the base checkout's
code (PYTHONPATH, Spark's Python workers included) and then with this tree's (or --this, a
checkout that cannot change while the runs go on), so a change is measured against the code it
replaces on the same machine and data. Every run is cold, unless `--engine N`: then each side has
a kstool home and warm engine of its own (started by a small run first, not counted), and each
step runs N times through each, in turns, each run a new app (the first of a step finds the
engine's JIT cold for its work). Results: bench/results/versus-<time>.json (processing records/s
and wall time per side, and their ratio; with --engine, of each side's best run, every run under
`turns`).
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack
from pathlib import Path

from bench.brokers import add_broker_option, bench_broker
from bench.load import create_topic, keyed_records, load, load_as_apps_do, text_lines
from bench.measure import cold_env, scratch_dir
from bench.runs import kstool, machine, run_once, write_results

# topic -> (records, keys, seed); the join topics hold a key per record, placed by Kafka's partitioner
TOPICS = {"bench-keys-5m": (5_000_000, 10_000, 2), "bench-keys-1m": (1_000_000, 10_000, 3),
          "bench-keys-1m-right": (1_000_000, 10_000, 4), "bench-join": (1_000_000, 1_000_000, 5),
          "bench-join-right": (1_000_000, 1_000_000, 6), "bench-keys-2m-apps": (2_000_000, 5_000, 4)}
APPS_WRITE = {"bench-keys-2m-apps"}  # loaded by a producer with its defaults, as applications write
EOS = ("--processing-guarantee", "exactly_once_v2")
STEPS = {
    "count_per_key_2m_apps": ("bench-keys-2m-apps", "aggregate", ()),
    "count_per_key_5m": ("bench-keys-5m", "aggregate", ()),
    "windowed_count_5m": ("bench-keys-5m", "aggregate", ("--window", "tumbling:1s")),
    "windowed_count_final_1m": ("bench-keys-1m", "aggregate", ("--window", "tumbling:1s", "--emit", "final")),
    "hopping_count_1m": ("bench-keys-1m", "aggregate", ("--window", "hopping:5s,1s")),
    "session_count_1m": ("bench-keys-1m", "aggregate", ("--window", "session:1s")),
    "table_table_join_2x1m": ("bench-keys-1m", "join", ("--kind", "table-table", "--how", "outer")),
    "stream_stream_join_1m_keys": ("bench-join", "join", ("--kind", "stream-stream", "--within", "1m")),
    "stream_stream_left_join_1m_keys": ("bench-join", "join", ("--kind", "stream-stream", "--how", "left",
                                                               "--within", "1m")),
    "stream_table_join_1m_keys": ("bench-join", "join", ("--kind", "stream-table", "--how", "left")),
    "table_table_join_1m_keys": ("bench-join", "join", ("--kind", "table-table", "--how", "outer")),
    "windowed_count_1m_eos": ("bench-keys-1m", "aggregate", ("--window", "tumbling:1s", *EOS)),
    "stream_table_join_1m_keys_eos": ("bench-join", "join", ("--kind", "stream-table", "--how", "left", *EOS)),
}


def load_topic(bootstrap: str, topic: str) -> None:
    """One of TOPICS, created and loaded."""
    count, keys, seed = TOPICS[topic]
    create_topic(bootstrap, topic, 2)
    records = keyed_records(count, keys=keys, seed=seed)
    if topic in APPS_WRITE:
        load_as_apps_do(bootstrap, topic, records)
    else:
        load(bootstrap, topic, records, 2, by_key=keys == count)


def checkout_env(env: dict, checkout: Path | None) -> dict:
    """A checkout's code first on the path (None: this tree, as installed): `commands` lives
    beside the package there, as here, so it is linked in as kstool.commands (what the editable
    install maps)."""
    if checkout is None:
        return env
    link = checkout / "kstool" / "commands"
    if not link.exists():
        link.symlink_to(checkout / "commands")
    return {**env, "PYTHONPATH": str(checkout)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", type=Path, required=True, help="a checkout of the kstool to compare with")
    parser.add_argument("--this", type=Path, help="a checkout to measure instead of this tree")
    parser.add_argument("--steps", default=",".join(STEPS), help="comma-separated: " + ", ".join(STEPS))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--engine", type=int, default=0, metavar="N", help="N runs per step through each side's warm engine")
    add_broker_option(parser)
    args = parser.parse_args()
    steps = args.steps.split(",")
    env = cold_env()
    # Python puts the working directory first on the path of `python -m` (the driver's and Spark's
    # workers'): from this tree's root it would import this tree on both sides
    os.chdir(env["KSTOOL_HOME"])
    brokers = ExitStack()
    bootstrap = brokers.enter_context(bench_broker(args.broker, env))
    results: dict = {"machine": machine(args.broker), "args": {**vars(args), "base": str(args.base), "this": str(args.this)},
                     "runs": {}}
    figures: dict = {}
    engines: list[dict] = []
    try:
        inputs = {STEPS[step][0] for step in steps}
        for topic in sorted(inputs | {t + "-right" for t, topology, _ in map(STEPS.get, steps) if topology == "join"}):
            load_topic(bootstrap, topic)
        sides = {"base": checkout_env(env, args.base), "this": checkout_env(env, args.this)}
        if args.engine:
            create_topic(bootstrap, "bench-warmup", 2)
            load(bootstrap, "bench-warmup", text_lines(1000), 2)
            for side, side_env in sides.items():
                sides[side] = engine_env(side_env, bootstrap, args.master, engines)
        for step in steps:
            topic, topology, options = STEPS[step]
            for turn in range(max(args.engine, 1)):
                for side, side_env in sides.items():
                    print(f"running {step} ({side}) ...", file=sys.stderr)
                    app = f"bench-{step}-{side}-{turn}".replace("_", "-")
                    run = run_once(side_env, topic, app, args.master, topology, options)
                    best = results["runs"].get(f"{step}_{side}")
                    if best is None or run["processing_s"] < best["processing_s"]:
                        results["runs"][f"{step}_{side}"] = run
                    results.setdefault("turns", {}).setdefault(f"{step}_{side}", []).append(run)
                    print(f"  {run}", file=sys.stderr)
            for side in sides:
                figures[f"{step}_{side}_records_per_s"] = results["runs"][f"{step}_{side}"]["records_per_s"]
            figures[f"{step}_speedup"] = round(results["runs"][f"{step}_base"]["processing_s"]
                                               / results["runs"][f"{step}_this"]["processing_s"], 2)
    finally:
        for engine in engines:
            kstool(engine, "engine", "stop")
        brokers.close()
    write_results(results, figures, prefix="versus-")


def engine_env(env: dict, bootstrap: str, master: str, engines: list[dict]) -> dict:
    """A side's own kstool home and warm engine (added to `engines`, to be stopped), on the
    bench's broker; the engine is started by a small run over bench-warmup."""
    home = {**env, "KSTOOL_HOME": scratch_dir("kstool-bench-versus-"),
            "KSTOOL_BOOTSTRAP_SERVERS": bootstrap, "KSTOOL_ENGINE": "on"}
    engines.append(home)
    run_once(home, "bench-warmup", f"bench-warmup-{Path(home['KSTOOL_HOME']).name}", master)
    return home


if __name__ == "__main__":
    main()
