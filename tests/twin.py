"""Kafka Streams as the oracle (tests/reference/.../Twin.java): kstool's topologies built with Kafka
Streams' DSL and run in its TopologyTestDriver, one JVM for many cases, a JSON line each way."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.apache_kafka import _die_with_parent, _java, kafka_jars
from tests.reference_apps import LOG_CONFIG, reference_classes


class Twin:
    """One JVM running kstool.reference.Twin; `ask(case)` sends a case and returns its records."""

    def __init__(self, state_dir: Path) -> None:
        """state_dir: the drivers' stores (RocksDB locks a folder: one per JVM)."""
        self.proc = subprocess.Popen(
            [_java(), "-Xmx256m", "-XX:TieredStopAtLevel=1", f"-Dlog4j2.configurationFile={LOG_CONFIG}",
             "-cp", f"{reference_classes()}:{kafka_jars()}/*", "kstool.reference.Twin", str(state_dir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True, preexec_fn=_die_with_parent)
        self.asked = 0

    def ask(self, case: dict[str, Any]) -> list[dict[str, Any]]:
        """The output records ({"key", "value", "timestamp"}) of one case."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.asked += 1
        self.proc.stdin.write(json.dumps({"id": self.asked, **case}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the twin exited ({self.proc.poll()})")
        answer = json.loads(line)
        assert answer["id"] == self.asked, answer
        if "error" in answer:
            raise AssertionError(f"the twin failed on {case}: {answer['error']}")
        return answer["records"]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
