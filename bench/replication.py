"""What replication costs (#83; not CI): `python -m bench.replication [--records N]`. The same
steps on one Apache Kafka node and on a three-node cluster (tests/apache_kafka.KafkaCluster: RF 3,
min.insync.replicas=2), in one run and on the same records: loading them (acks=all, large
batches), count per key at least once and exactly once (`kstool run aggregate --once`, cold),
and `kstool consume -e -o jsonl`. Prints a table and writes bench/results/replication-<time>.json."""

from __future__ import annotations

import argparse
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tabulate import tabulate

from bench.load import create_topic, keyed_records, load
from bench.measure import cold_env, scratch_dir
from bench.runs import consume_jsonl, machine, run_once, write_results
from tests.apache_kafka import KafkaBroker, KafkaCluster

PARTITIONS = 4
TOPIC = "bench-keys"
STEPS = ("load", "count_per_key", "count_per_key_exactly_once", "consume_jsonl")


@contextmanager
def _brokers(nodes: int) -> Iterator[str]:
    """One node, or three replicating each other: their bootstrap servers, stopped at the end."""
    started = (KafkaBroker if nodes == 1 else KafkaCluster)(Path(scratch_dir(f"kstool-bench-{nodes}-node-"))).start()
    try:
        yield started.bootstrap
    finally:
        started.stop()


def measure(nodes: int, records: int, master: str) -> dict:
    env = cold_env(f"kstool-bench-replication-{nodes}-")
    with _brokers(nodes) as bootstrap:
        env["KSTOOL_BOOTSTRAP_SERVERS"] = bootstrap
        create_topic(bootstrap, TOPIC, PARTITIONS)  # the broker's replication factor
        load_s = load(bootstrap, TOPIC, keyed_records(records), PARTITIONS)
        return {"load_records_per_s": round(records / load_s),
                "count_per_key": run_once(env, TOPIC, "count", master, "aggregate"),
                "count_per_key_exactly_once": run_once(env, TOPIC, "count-eos", master, "aggregate",
                                                       ("--processing-guarantee", "exactly_once_v2")),
                "consume_jsonl": consume_jsonl(env, TOPIC, records)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    runs = {f"{nodes}_node": measure(nodes, args.records, args.master) for nodes in (1, 3)}
    figures = {}
    for name, run in runs.items():
        figures[f"load_{name}_records_per_s"] = run["load_records_per_s"]
        for step in ("count_per_key", "count_per_key_exactly_once", "consume_jsonl"):
            figures[f"{step}_{name}_records_per_s"] = run[step]["records_per_s"]
    for step in STEPS:
        figures[f"{step}_3_over_1_node"] = round(
            figures[f"{step}_3_node_records_per_s"] / figures[f"{step}_1_node_records_per_s"], 2)
    print(tabulate([(step, figures[f"{step}_1_node_records_per_s"], figures[f"{step}_3_node_records_per_s"],
                     figures[f"{step}_3_over_1_node"]) for step in STEPS],
                   headers=("records/s", "1 node", "3 nodes (RF 3)", "3 / 1")))
    write_results({"machine": machine("apache-kafka"), "records": args.records, "runs": runs}, figures,
                  prefix="replication-")


if __name__ == "__main__":
    main()
