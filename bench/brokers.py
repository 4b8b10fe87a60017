"""The bench's broker: Apache Kafka by default (a KRaft broker of its own, from Maven Central:
tests/apache_kafka.py), the broker users run and whose figures they will see; or kstool's
embedded one (`--broker embedded`). A result file's `machine.broker` says which."""

from __future__ import annotations

import argparse
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from bench.measure import scratch_dir
from tests.apache_kafka import KAFKA_VERSION, KafkaBroker

KSTOOL = [sys.executable, "-m", "kstool.commands.main"]
BROKERS = {"apache-kafka": f"Apache Kafka {KAFKA_VERSION} (KRaft, one node)", "embedded": "kstool's embedded broker (Tansu)"}


def add_broker_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--broker", choices=sorted(BROKERS), default="apache-kafka",
                        help="the broker the bench runs on [default: apache-kafka]")


@contextmanager
def bench_broker(kind: str, env: dict) -> Iterator[str]:
    """A broker for the bench's commands (run with `env`, which then names it), stopped at the end."""
    if kind == "embedded":
        started = subprocess.run([*KSTOOL, "broker", "start", "--port", "0"], env=env, capture_output=True,
                                 text=True, check=True)
        try:
            yield started.stdout.strip()
        finally:
            subprocess.run([*KSTOOL, "broker", "stop"], env=env, capture_output=True)
        return
    broker = KafkaBroker(Path(scratch_dir("kstool-bench-kafka-"))).start()
    env["KSTOOL_BOOTSTRAP_SERVERS"] = broker.bootstrap
    try:
        yield broker.bootstrap
    finally:
        broker.stop()
