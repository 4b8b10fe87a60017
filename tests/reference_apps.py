"""Kafka Streams' own applications for the tests (tests/reference/src/main/java): compiled once
with javac against the jars tests/apache_kafka.py fetches (cached by the sources' digest), each
run as a process of its own against a real broker, stopped when the test is done with it."""

from __future__ import annotations

import fcntl
import hashlib
import json
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from tests.apache_kafka import CACHE, REPO, ReferenceMissing, _die_with_parent, _java, class_sharing, kafka_jars

SOURCES = REPO / "tests" / "reference" / "src" / "main" / "java"
LOG_CONFIG = REPO / "tests" / "reference" / "log4j2.properties"
START_TIMEOUT_S = 120  # a hang guard: the first rebalance of a cold JVM on a busy 2-core machine


def reference_classes() -> Path:
    """The compiled apps, compiled the first time (a lock: xdist workers compile once)."""
    files = sorted(SOURCES.rglob("*.java"))
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:12]
    classes = CACHE.parent / f"reference-apps-{digest}"
    if (classes / ".complete").exists():
        return classes
    lib = kafka_jars()
    javac = str(Path(_java()).with_name("javac"))
    classes.parent.mkdir(parents=True, exist_ok=True)
    with open(classes.parent / ".reference-apps.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (classes / ".complete").exists():
            shutil.rmtree(classes, ignore_errors=True)
            built = subprocess.run([javac, "-d", str(classes), "-cp", f"{lib}/*", "--release", "17",
                                    *map(str, files)], capture_output=True, text=True)
            if built.returncode != 0:
                raise ReferenceMissing(f"javac could not compile the reference apps: {built.stderr.strip()[-500:]}")
            (classes / ".complete").touch()
    return classes


def run_bench_app(twin: str, bootstrap: str, app: str, state_dir: str, cache_bytes: int, expected: int,
                  output: str, inputs: list[str], timeout: float = 2400) -> dict[str, Any]:
    """BenchApp (tests/reference/.../BenchApp.java): Kafka Streams' `twin` over the inputs as a
    new application, in a JVM of its own, until it has read `expected` records, then closed (its
    record caches flushed); its JSON line, with `wall_s`, the whole run's seconds."""
    started = time.perf_counter()
    done = subprocess.run(
        [_java(), "-Xmx1g", f"-Dlog4j2.configurationFile={LOG_CONFIG}", "-cp", f"{reference_classes()}:{kafka_jars()}/*",
         "kstool.reference.BenchApp", twin, bootstrap, app, state_dir, str(cache_bytes), str(expected), output, *inputs],
        capture_output=True, text=True, timeout=timeout, preexec_fn=_die_with_parent)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise AssertionError(f"Kafka Streams' {twin} failed: {done.stderr.strip()[-2000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "wall_s": round(wall, 2)}


class ReferenceApp:
    """One Kafka Streams application (ReferenceApp.java names them) in a JVM of its own."""

    def __init__(self, app: str, bootstrap: str, application_id: str, protocol: str, state_dir: Path,
                 input_topic: str, output_topic: str, config: dict[str, str] | None = None):
        """config: more StreamsConfig settings."""
        self.args = [app, bootstrap, application_id, protocol, str(state_dir), input_topic, output_topic,
                     *(f"{name}={value}" for name, value in (config or {}).items())]
        self.application_id, self.state_dir = application_id, state_dir
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.topology = ""

    def start(self) -> "ReferenceApp":
        # Kafka's jars first: the tests' class-data archive (tests/apache_kafka.py) serves a class
        # path that starts with them
        classpath = f"{kafka_jars()}/*:{reference_classes()}"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / "app.log", "ab") as log:  # the app's own copy outlives this one
            self.proc = subprocess.Popen(
                [_java(), "-Xmx256m", *class_sharing(), f"-Dlog4j2.configurationFile={LOG_CONFIG}", "-cp", classpath,
                 "kstool.reference.ReferenceApp", *self.args],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                text=True, start_new_session=True, preexec_fn=_die_with_parent)
        threading.Thread(target=self._read, daemon=True).start()
        self._expect("topology:")
        described = []
        while (line := self._next()) != "end-topology":
            described.append(line)
        self.topology = "\n".join(described).strip() + "\n"
        self._expect("state RUNNING")
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _next(self, timeout: float = START_TIMEOUT_S) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the reference app said nothing for {timeout}s; see {self.state_dir / 'app.log'}") from None
        if line is None:
            raise AssertionError(f"the reference app exited; see {self.state_dir / 'app.log'}")
        return line

    def _expect(self, wanted: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while self._next(max(deadline - time.monotonic(), 0.1)) != wanted:
            pass

    def query(self, store: str, kind: str = "key-value", keys: list[str] | None = None) -> Any:
        """What Interactive Queries return for the store: {key: value} for a key-value store; for a
        window or session store, [{"key", "start", "end", "value"}, ...]; for a versioned store,
        {key: {"value", "timestamp"}} of the keys given (no spaces in them)."""
        out = self.state_dir / f"query-{store}.json"
        self._send(" ".join(["query", kind, store, str(out), *(keys or [])]))
        self._expect(f"queried {out}")
        return json.loads(out.read_text())

    def _send(self, command: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self._send("stop")
            self.proc.stdin.close()
            self.proc.wait(60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(30)

    def __enter__(self) -> "ReferenceApp":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
