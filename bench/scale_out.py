"""Scale-out figures (#38, #71; not CI): `python -m bench.scale_out [--records N] [--jobs ...]`, and
a step of `make bench`.

The same `--once` jobs on a Spark standalone cluster (tests/cluster.py's, from the installed
pyspark) of one worker × one core, then of two workers × one core, each worker (and the
executors it starts) in a CPU-quota group of its own (`--worker-cores`, default 0.4 of a core:
bench.cpu_quota; the driver and the broker outside; unquoted where the machine does not allow
groups, and the results say why), over records in 4 partitions (each job's size in JOBS):
count per key and windowed count (`tumbling:1s`) over 10M, a stream-table join (`--how left`,
the right topic as the table) over 2 × 5M, table-aggregate (1M updates of 10,000 rows moving
among 100 groups, counted by group: its two stages of tasks) and a foreign-key join (1M updates
of 10,000 orders moving among 1,000 customers, whose rows change a tenth as often: its three
stages). The workers see the kstool home, so each checkpoint stays in its app's folder. Per
job: processing records/s on each cluster, the efficiency rate(2) / (2 × rate(1)), each worker
group's CPU seconds and share of throttled periods, the
driver's CPU seconds (`cpu_s`: the command's process tree) and those outside the groups (driver,
broker, the rest of the machine). On two workers each job runs again exactly once
(`*_2w_eos`): its processing time against at least once, and the driver's share of the CPU the
driver and the workers used. Results: bench/results/scale-out-<time>.json."""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

from bench import cpu_quota
from bench.load import create_topic, keyed_records, load
from bench.measure import scratch_dir
from tests.cluster import SparkCluster

PARTITIONS = 4
WORKER_CORES = 0.4  # each worker's quota (#71): two of them and the driver and broker fit in 2 cores
TOPIC = "bench-scale"
JOIN = TOPIC + "-join"  # and JOIN-right, the table
TABLE = TOPIC + "-table"  # rows: a key's value is its group
ORDERS = TOPIC + "-orders"  # rows naming a customer (ORDERS-right) in a JSON field
# name -> (topology, its options, its input, its records a topic): sizes where the records' work,
# not each executor's start (~6.5 CPU-s), is most of the run (bench/notes/scale-out.md, "Under CPU quotas")
JOBS = {
    "count_per_key": ("aggregate", (), TOPIC, 10_000_000),
    "windowed_count": ("aggregate", ("--window", "tumbling:1s"), TOPIC, 10_000_000),
    "stream_table_join": ("join", ("--kind", "stream-table", "--how", "left"), JOIN, 5_000_000),
    "table_aggregate": ("table-aggregate", (), TABLE, 1_000_000),
    "foreign_key_join": ("join", ("--kind", "table-table", "--foreign-key", "field:c"), ORDERS, 1_000_000),
}


def load_inputs(bootstrap: str, records: int | None = None, jobs: tuple[str, ...] = tuple(JOBS)) -> None:
    """The inputs the jobs read (a join's left topic and its -right), each job's records a topic
    (or `records`)."""
    size = {JOBS[job][2]: records or JOBS[job][3] for job in jobs}
    inputs = {TOPIC: lambda n: keyed_records(n, keys=10_000, seed=7),
              JOIN: lambda n: keyed_records(n, keys=10_000, seed=7),
              JOIN + "-right": lambda n: keyed_records(n, keys=10_000, seed=8),
              TABLE: lambda n: table_rows(n, "g{}", 100), ORDERS: lambda n: table_rows(n, '{{"c": "c{}"}}', 1_000),
              ORDERS + "-right": lambda n: table_rows(n // 10, "name{}", 1_000, key="c{}", keys=1_000)}
    size.update({f"{JOBS[job][2]}-right": size[JOBS[job][2]] for job in jobs if JOBS[job][0] == "join"})
    for topic in (topic for topic in inputs if topic in size):
        create_topic(bootstrap, topic, PARTITIONS)
        load(bootstrap, topic, inputs[topic](size[topic]), PARTITIONS, by_key=True)


def table_rows(n: int, value: str, values: int, key: str = "k{}", keys: int = 10_000, seed: int = 9):
    """n updates of `keys` rows, each taking one of `values` values at random (formats: str.format)."""
    rng = random.Random(seed)
    for _ in range(n):
        yield key.format(rng.randrange(keys)).encode(), value.format(rng.randrange(values)).encode()


def scale_out(run_once, env: dict, worker_cores: float = WORKER_CORES, jobs: tuple[str, ...] = tuple(JOBS),
              exactly_once: bool = True) -> dict:
    """Each job on one worker, then on two (one core each; `exactly_once`: then again so),
    every worker in a CPU-quota group of `worker_cores` (bench.cpu_quota) where the machine
    allows, else unquoted and marked so; `run_once` as bench's."""
    missing = cpu_quota.problem()
    runs: dict = {"worker_cores": None if missing else worker_cores, "unquoted_because": missing}
    for workers in (1, 2):
        cluster = SparkCluster(Path(scratch_dir("kstool-bench-cluster-")), None, workers=workers)
        groups: list[cpu_quota.QuotaGroup] = []
        # every executor registered before the first batch, or it starts on the first alone
        conf = ("--conf", f"spark.cores.max={workers}", "--conf", "spark.scheduler.minRegisteredResourcesRatio=1")
        try:
            for index, worker in enumerate(cluster.workers if missing is None else ()):
                assert worker is not None
                groups.append(cpu_quota.QuotaGroup(f"worker{index}", worker_cores))
                groups[-1].add(worker.pid)  # spark-class execs the worker's JVM: this pid is it
            # on two workers, each job again exactly once: its transactions' cost beside at least once
            guarantees = ("at_least_once", "exactly_once_v2") if workers == 2 and exactly_once else ("at_least_once",)
            for guarantee in guarantees:
                for job in jobs:
                    topology, options, topic, _ = JOBS[job]
                    name = f"{job}_{workers}w" + ("_eos" if guarantee == "exactly_once_v2" else "")
                    print(f"  {name} ...", file=sys.stderr)
                    before = [group.usage() for group in groups], cpu_quota.machine_cpu_s()
                    run = run_once(env, topic, f"bench-scale-{name}".replace("_", "-"), cluster.url, topology,
                                   (*options, *conf, "--processing-guarantee", guarantee))
                    runs[name] = {**run, **_cpu(groups, *before)}
        finally:
            cluster.stop()
            for group in groups:
                group.remove()
    for job in jobs:
        one, two = runs[f"{job}_1w"]["records_per_s"], runs[f"{job}_2w"]["records_per_s"]
        runs[f"{job}_efficiency"] = round(two / (2 * one), 2)
        if not exactly_once:
            continue
        alos, eos = runs[f"{job}_2w"], runs[f"{job}_2w_eos"]
        runs[f"{job}_eos_time_ratio"] = round(eos["processing_s"] / alos["processing_s"], 2)
        # the driver's share of the CPU the run used on the driver and the workers
        runs[f"{job}_eos_driver_share"] = round(eos["cpu_s"] / (eos["cpu_s"] + sum(
            w["cpu_s"] for w in eos["workers_cpu"])), 2) if eos["workers_cpu"] else None
    return runs


def _cpu(groups: list[cpu_quota.QuotaGroup], before: list[dict], machine_before: float) -> dict:
    """The run's CPU seconds in each worker's group (and how often it hit its quota), and outside
    them: the driver, the broker and the rest of the machine."""
    after, machine = [group.usage() for group in groups], cpu_quota.machine_cpu_s() - machine_before
    workers = [{"cpu_s": round(a["cpu_s"] - b["cpu_s"], 2),
                "throttled_share": round((a["throttled"] - b["throttled"]) / max(a["periods"] - b["periods"], 1), 2)}
               for a, b in zip(after, before, strict=True)]
    return {"workers_cpu": workers, "outside_workers_cpu_s": round(machine - sum(w["cpu_s"] for w in workers), 2)}


def figures(runs: dict) -> dict:
    return {f"{job}_{figure}": runs[f"{job}_{figure}"] for job in JOBS
            for figure in ("efficiency", "eos_time_ratio", "eos_driver_share") if f"{job}_{figure}" in runs}


def main() -> None:
    from bench.brokers import add_broker_option, bench_broker
    from bench.measure import cold_env
    from bench.runs import cold_start, machine, run_once, write_results

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, help="records a topic for every job (default: each job's own)")
    parser.add_argument("--worker-cores", type=float, default=WORKER_CORES, help="each worker's CPU quota, in cores")
    parser.add_argument("--jobs", default=",".join(JOBS), help=f"a comma-separated choice of {', '.join(JOBS)}")
    parser.add_argument("--no-exactly-once", dest="exactly_once", action="store_false",
                        help="skip the exactly-once runs on two workers")
    add_broker_option(parser)
    args = parser.parse_args()
    jobs = tuple(args.jobs.split(","))
    if set(jobs) - set(JOBS):
        parser.error(f"--jobs: no job {', '.join(sorted(set(jobs) - set(JOBS)))}")
    env = cold_env("kstool-bench-scale-")
    os.chdir(env["KSTOOL_HOME"])  # not this tree's root: `python -m` would put it first on the path
    results: dict = {"machine": machine(args.broker), "args": vars(args)}
    with bench_broker(args.broker, env) as bootstrap:
        load_inputs(bootstrap, args.records, jobs)
        # the driver's JVM archive first, as in the full run: recorded after a first job, it would
        # share the machine with the next ones
        cold_start(env, bootstrap, "local[2]")
        results["runs"] = scale_out(run_once, env, args.worker_cores, jobs, args.exactly_once)
    write_results(results, figures(results["runs"]), prefix="scale-out-")


if __name__ == "__main__":
    main()
