"""Scale-out figures (#38, not CI): `python -m bench.scale_out [--records 1000000]`, and a step
of `make bench`.

The same `--once` jobs on a Spark standalone cluster (tests/cluster.py's, from the installed
pyspark) of one worker × one core, then of two workers × one core, over records in 4
partitions: count per key, windowed count (`tumbling:1s`), and a stream-table join (`--how
left`, the right topic as the table). The workers see the kstool home, so each checkpoint stays
in its app's folder. Per job: processing records/s on each cluster and the efficiency
rate(2) / (2 × rate(1)). Results: bench/results/scale-out-<time>.json."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bench.load import create_topic, keyed_records, load
from bench.measure import scratch_dir
from tests.cluster import SparkCluster

PARTITIONS = 4
TOPIC = "bench-scale"
# name -> (topology, its options); a join reads TOPIC and TOPIC-right
JOBS = {
    "count_per_key": ("aggregate", ()),
    "windowed_count": ("aggregate", ("--window", "tumbling:1s")),
    "stream_table_join": ("join", ("--kind", "stream-table", "--how", "left")),
}


def load_inputs(bootstrap: str, records: int) -> None:
    for side, seed in (("", 7), ("-right", 8)):
        create_topic(bootstrap, TOPIC + side, PARTITIONS)
        load(bootstrap, TOPIC + side, keyed_records(records, keys=10_000, seed=seed), PARTITIONS, by_key=True)


def scale_out(run_once, env: dict) -> dict:
    """Each job on one worker, then on two (one core each); `run_once` as bench's."""
    runs: dict = {}
    for workers in (1, 2):
        cluster = SparkCluster(Path(scratch_dir("kstool-bench-cluster-")), None, workers=workers)
        # every executor registered before the first batch, or it starts on the first alone
        conf = ("--conf", f"spark.cores.max={workers}", "--conf", "spark.scheduler.minRegisteredResourcesRatio=1")
        try:
            for job, (topology, options) in JOBS.items():
                print(f"  {job} on {workers} worker(s) ...", file=sys.stderr)
                runs[f"{job}_{workers}w"] = run_once(env, TOPIC, f"bench-scale-{job}-{workers}w".replace("_", "-"),
                                                     cluster.url, topology, (*options, *conf))
        finally:
            cluster.stop()
    for job in JOBS:
        one, two = runs[f"{job}_1w"]["records_per_s"], runs[f"{job}_2w"]["records_per_s"]
        runs[f"{job}_efficiency"] = round(two / (2 * one), 2)
    return runs


def figures(runs: dict) -> dict:
    return {f"{job}_efficiency": runs[f"{job}_efficiency"] for job in JOBS}


def main() -> None:
    from bench.brokers import add_broker_option, bench_broker
    from bench.measure import cold_env
    from bench.runs import machine, run_once, write_results

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000, help="keyed records per topic")
    add_broker_option(parser)
    args = parser.parse_args()
    env = cold_env("kstool-bench-scale-")
    os.chdir(env["KSTOOL_HOME"])  # not this tree's root: `python -m` would put it first on the path
    results: dict = {"machine": machine(args.broker), "args": vars(args)}
    with bench_broker(args.broker, env) as bootstrap:
        load_inputs(bootstrap, args.records)
        results["runs"] = scale_out(run_once, env)
    write_results(results, figures(results["runs"]), prefix="scale-out-")


if __name__ == "__main__":
    main()
