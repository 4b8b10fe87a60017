"""kstool.engine.spark.python_forks: a `python -m MODULE ...` Spark starts through kstool's
launcher is forked by a server that imported the modules once, and is to the JVM what a fresh
Python would be (arguments, environment, folder, umask, streams, exit status, signals); what the
server cannot serve as a fresh Python runs fresh; the server and what it forked end with the
process that started it. tests/engine/spark/fork_probe.py stands in for Spark's modules."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kstool.base.processes import pid_alive
from kstool.engine.spark.python_forks import ADDRESS_ENV, SPARK_PYTHON_ENV
from kstool.engine.spark.spark_home import python_for
from tests.conftest import cli
from tests.helpers import create_topic, produce_values, wait_until

REPO = Path(__file__).resolve().parents[3]
PROBE = ("-m", "tests.engine.spark.fork_probe")
# a kstool process that starts a server as it starts its JVM, says the server's address, and
# lives until its stdin closes
OWNER = ("import os, sys\nfrom kstool.engine.spark.python_forks import ADDRESS_ENV, forking_pythons\n"
         "with forking_pythons(None):\n    print(os.environ[ADDRESS_ENV], flush=True)\nsys.stdin.read()\n")


@dataclass
class Started:
    process: subprocess.Popen
    said: dict

    @property
    def forked(self) -> bool:
        return self.said["pid"] != self.process.pid  # fresh: the relay became the Python it started


@dataclass
class Server:
    owner: subprocess.Popen
    env: dict[str, str]  # what Spark gives the processes it starts, with the server's address

    def start(self, *args: str, env: dict[str, str] | None = None) -> Started:
        process = subprocess.Popen([python_for("local[2]"), *PROBE, *args], env=env or self.env, cwd=REPO,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                   preexec_fn=lambda: os.umask(0o027))
        if "read" in args:
            process.stdin.write("hello")
        process.stdin.close()
        return Started(process, json.loads(process.stdout.readline()))


@pytest.fixture
def server():
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    served = Server(owner, {**os.environ, **SPARK_PYTHON_ENV, ADDRESS_ENV: owner.stdout.readline().strip(),
                            "PROBE": "given"})
    wait_until(lambda: _ran(served.start("0")).forked, "the server forking")  # listening before its imports end
    yield served
    owner.kill()
    owner.wait()


def _ran(started: Started, timeout: float = 60) -> Started:
    started.process.wait(timeout)
    return started


def _fresh(env: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key != ADDRESS_ENV}


def test_a_forked_process_is_what_a_fresh_python_is_to_the_jvm(server):
    waiting = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # a relay that has not asked yet
    waiting.connect(b"\0kstool-python-forks-" + server.env[ADDRESS_ENV].encode())
    forked, fresh = (_ran(server.start("3", "read", env=env)) for env in (server.env, _fresh(server.env)))
    waiting.close()
    assert forked.forked and not fresh.forked
    assert forked.process.returncode == fresh.process.returncode == 3
    del forked.said["pid"], fresh.said["pid"]
    assert forked.said == fresh.said
    assert forked.said == {"argv": ["3", "read"], "cwd": str(REPO), "path0": str(REPO), "umask": 0o027, "probe": "given",
                           "hash": fresh.said["hash"], "stdin": "hello", "main": "__main__",
                           "fds": ["0", "1", "2", "3"]}  # none of the server's: 3 lists them


def test_signals_reach_the_forked_process_and_its_end_is_the_relays(server):
    waiting = server.start("0", "wait-term")
    assert waiting.forked
    waiting.process.send_signal(signal.SIGTERM)
    assert _ran(waiting).process.returncode == 7
    assert waiting.process.stdout.read() == "terminated\n"
    killed = _ran(server.start("0", "kill-self"))
    assert killed.forked and killed.process.returncode == -signal.SIGKILL


def test_a_forked_process_dies_with_its_relay(server):
    sleeping = server.start("0", "sleep")
    assert sleeping.forked and pid_alive(sleeping.said["pid"])
    sleeping.process.kill()  # as a JVM that dies takes its children's pipes, not their children
    sleeping.process.wait()
    wait_until(lambda: not pid_alive(sleeping.said["pid"]), "the forked process gone")


def test_what_a_fresh_python_would_do_otherwise_runs_fresh(server, tmp_path):
    for differs in ({"PYTHONPATH": str(tmp_path)}, {"PYTHONHASHSEED": "1"}, {"PYTHONOPTIMIZE": "1"}):
        assert not _ran(server.start("0", env={**server.env, **differs})).forked, differs
    assert not _ran(server.start("0", env={**server.env, ADDRESS_ENV: "none-listens-here"})).forked
    # Spark's own: a zip of pyspark in a SPARK_HOME that has none (kstool.engine.spark.spark_home)
    assert _ran(server.start("0", env={**server.env, "PYTHONPATH": str(tmp_path / "python" / "lib" / "pyspark.zip")})).forked


def test_the_server_and_what_it_forked_end_with_the_process_that_started_it(server):
    sleeping = server.start("0", "sleep")
    assert sleeping.forked
    assert len(_serving(server.env[ADDRESS_ENV])) == 2  # the server and the process it forked
    server.owner.kill()
    wait_until(lambda: not _serving(server.env[ADDRESS_ENV]), "the server and its forked process gone")
    assert _ran(sleeping).process.returncode == -signal.SIGKILL


def _command_lines() -> Iterator[tuple[int, list[bytes]]]:
    """Every process's pid and command line, as /proc shows them now."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                yield int(entry.name), (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:  # gone meanwhile
                continue


def _serving(address: str) -> list[int]:
    """The server of this address, and the processes it forked (which keep its command line)."""
    return [pid for pid, command in _command_lines()
            if b"kstool.engine.spark.python_forks" in command and address.encode() in command and pid_alive(pid)]


def test_a_local_runs_python_processes_are_forked(kafka, spark, topic_name):
    """The streaming source's runner, the task workers' daemon and the planners of a run on the
    suite's Spark session: started by the relay, which stays only when the server forked them."""
    relayed: set[str] = set()
    running = threading.Event()

    def sample() -> None:
        while not running.wait(0.05):
            relayed.update(command[command.index(b"-m") + 1].decode() for _, command in _command_lines()
                           if any(part.endswith(b"python_forks_relay.py") for part in command))

    create_topic(kafka, topic_name, 1)
    produce_values(kafka, topic_name, [b"a b", b"b c"])
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        ran = cli("run", "wordcount", "--input", topic_name, "--output", topic_name + "-out", "--app-id", topic_name, "--once")
    finally:
        running.set()
        sampler.join()
    assert ran.exit_code == 0, ran.stderr
    assert "pyspark.sql.streaming.python_streaming_source_runner" in relayed, relayed
