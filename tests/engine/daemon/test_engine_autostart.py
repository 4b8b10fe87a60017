"""Every run warm (#36): the first command that wants Spark starts the engine of its kstool home,
later ones reuse it, an idle one stops by itself, two commands racing to start one end with
one, and KSTOOL_ENGINE=off or another kstool runs in the command's own process. Each test has a
kstool home of its own (an engine is per home) on the session's broker; commands run as
operators run them, in processes of their own."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kstool.base.processes import pid_alive
from tests.conftest import cli_subprocess, home_sharing_jvm_archive
from tests.helpers import KSTOOL, as_long, create_topic, latest_per_key, produce_batched, read_all, wait_until
from tests.oracles import word_counts as oracle

LINES = [f"w{i % 13} w{i % 5} common" for i in range(120)]


@pytest.fixture
def home(kafka, jvm_archive, tmp_path: Path, monkeypatch) -> Path:
    """A kstool home of its own (with the session's JVM class-data archive), with the engine
    wanted (tests/conftest.py turns it off)."""
    for name, value in home_sharing_jvm_archive(tmp_path).items():
        monkeypatch.setenv(name, value)
    home = Path(os.environ["KSTOOL_HOME"])
    monkeypatch.setenv("KSTOOL_BOOTSTRAP_SERVERS", kafka.bootstrap)
    monkeypatch.setenv("KSTOOL_ENGINE", "on")
    monkeypatch.delenv("KSTOOL_ENGINE_IDLE", raising=False)
    yield home
    cli_subprocess("engine", "stop", timeout=300)


def _status() -> dict:
    result = cli_subprocess("engine", "status", "-o", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _log(home: Path) -> str:
    path = home / "engine" / "engine.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _wordcount(topic: str, app: str, *extra: str) -> list[str]:
    return ["run", "wordcount", "--input", topic, "--output", app + "-out", "--app-id", app, "--once", *extra]


def _counts(kafka, app: str) -> dict:
    return {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, app + "-out")).items()}


def _feed(kafka, topic: str, lines: list[str]) -> None:
    produce_batched(kafka, topic, [(None, line.encode()) for line in lines])


def test_the_first_run_starts_the_engine_and_later_commands_reuse_it(kafka, home, topic_name):
    create_topic(kafka, topic_name, 2)
    app = topic_name + "-app"
    _feed(kafka, topic_name, LINES[:60])
    first = cli_subprocess(*_wordcount(topic_name, app), timeout=300)
    assert first.exit_code == 0, first.stderr
    assert re.search(r"started the warm engine in \d+\.\ds for later runs", first.stderr), first.stderr
    # what the wait was for, while it lasted (#84): relayed from the engine's start
    assert re.search(r"kstool: [^:]+: starting Spark \(local\[\S+\]\): its JVM, then Python workers", first.stderr), first.stderr
    status = _status()
    assert status["running"] and status["idle_timeout_s"] == 1800  # 30 minutes unless told
    table = cli_subprocess("engine", "status").stdout  # sizes and durations for people
    assert "JVM HEAP USED" in table and "MiB" in table and "30m00s" in table
    _feed(kafka, topic_name, LINES[60:])
    second = cli_subprocess(*_wordcount(topic_name, app), timeout=300)
    assert second.exit_code == 0, second.stderr
    assert "started the warm engine" not in second.stderr and "without the engine" not in second.stderr
    got = cli_subprocess("state", "get", "common", "--app-id", app, "-o", "json", timeout=300)
    assert got.exit_code == 0 and json.loads(got.stdout)[0]["value"] == len(LINES)
    assert _status()["pid"] == status["pid"]
    log = _log(home)
    assert log.count(f"{app}: run_app for client pid") == 2 and f"state of {app}: read_checkpoint" in log
    assert log.count(" ready on ") == 1
    assert _counts(kafka, app) == dict(oracle(LINES))


def test_an_idle_engine_stops_by_itself_and_the_next_run_starts_another(kafka, home, topic_name, monkeypatch):
    monkeypatch.setenv("KSTOOL_ENGINE_IDLE", "3s")
    create_topic(kafka, topic_name, 2)
    app = topic_name + "-app"
    _feed(kafka, topic_name, LINES[:40])
    assert cli_subprocess(*_wordcount(topic_name, app), timeout=300).exit_code == 0
    first = _status()
    assert first["running"] and first["parked"] == [str(home / "apps" / app)]
    # its pid file goes just before it logs "stopped": status may say so a moment before the log
    wait_until(lambda: not _status()["running"] and f"engine {first['pid']} stopped" in _log(home),
               "the idle engine to stop")
    assert "idle for 3.0s: stopping" in _log(home)
    assert not (home / "engine" / "engine.sock").exists()

    _feed(kafka, topic_name, LINES[40:80])
    again = cli_subprocess(*_wordcount(topic_name, app), timeout=300)
    assert again.exit_code == 0 and "started the warm engine" in again.stderr, again.stderr
    assert _status()["pid"] != first["pid"]
    # (an engine killed, its socket left behind: test_engine's last test)
    assert _counts(kafka, app) == dict(oracle(LINES[:80]))


def test_an_engine_whose_kstool_home_is_deleted_stops_with_its_jvm(home):
    """No kstool command can find such an engine (its socket is gone): it must not run on for its
    idle timeout (30 minutes) holding a JVM."""
    assert cli_subprocess("engine", "start", timeout=300).exit_code == 0
    pid = _status()["pid"]
    jvms = [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    assert jvms  # Spark's JVM, started by the engine
    shutil.rmtree(home)
    wait_until(lambda: not any(pid_alive(p) for p in [pid, *jvms]), "the engine of a deleted home to stop")


def test_two_commands_racing_to_start_an_engine_end_with_one(kafka, home, topic_name):
    apps = [f"{topic_name}-{n}" for n in (1, 2)]
    for app in apps:
        create_topic(kafka, app, 1)
        _feed(kafka, app, LINES)
    runs = [subprocess.Popen([*KSTOOL, *_wordcount(app, app)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=os.environ.copy()) for app in apps]
    stderrs = [run.communicate(timeout=300)[1] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], stderrs
    assert sum("started the warm engine" in stderr for stderr in stderrs) == 1
    assert _log(home).count(" ready on ") == 1
    for app in apps:
        assert _counts(kafka, app) == dict(oracle(LINES))


def test_with_the_engine_off_a_run_starts_no_engine(kafka, home, topic_name, monkeypatch):
    """A run whose input is missing fails as it would in an engine, but in its own process: no
    engine starts for it (runs that work in their own process: the kill tests')."""
    monkeypatch.setenv("KSTOOL_ENGINE", "off")
    app = topic_name + "-app"
    run = cli_subprocess(*_wordcount(topic_name + "-missing", app), timeout=300)
    assert run.exit_code == 1 and run.stderr == f"kstool: error: topic '{topic_name}-missing' does not exist\n"
    assert _status() == {"running": False} and not (home / "engine" / "engine.log").exists()


def test_a_command_of_another_kstool_runs_in_its_own_process_and_says_why_once(kafka, home, topic_name):
    app = topic_name + "-app"
    assert cli_subprocess("engine", "start", timeout=300).exit_code == 0
    other = ("import sys, kstool\nkstool.__version__ = '0.0.0-other'\n"
             "from kstool.commands.main import run\nsys.exit(run(sys.argv[1:]))\n")
    proc = subprocess.run([sys.executable, "-c", other, *_wordcount(topic_name + "-missing", app)],
                          capture_output=True, text=True, timeout=300)
    refusals = [line for line in proc.stderr.splitlines() if "running without the engine" in line]
    assert len(refusals) == 1 and "the engine runs kstool" in refusals[0], proc.stderr
    # the run failed in this process, as a run of its own does: the engine never saw it
    assert proc.returncode == 1 and proc.stderr.endswith(f"topic '{topic_name}-missing' does not exist\n")
    assert f"{app}: run_app" not in _log(home)


class _Query:
    """What ParkedQueries needs of a pyspark StreamingQuery."""

    isActive = True

    def __init__(self):
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_an_engine_keeps_at_most_its_limit_of_parked_queries_stopping_the_least_recently_used(tmp_path):
    from kstool.engine.query.parking import ParkedQueries, ParkedQuery

    parked = ParkedQueries(limit=2)
    queries = {name: ParkedQuery(name, _Query(), tmp_path / f"{name}.gate") for name in ("a", "b", "c")}
    parked.park(Path("a"), queries["a"])
    parked.park(Path("b"), queries["b"])
    taken = parked.take(Path("a"), "a", None)  # a run of a: a is now the most recently used
    assert taken is queries["a"]
    parked.park(Path("a"), taken)
    parked.park(Path("c"), queries["c"])  # one too many: b goes
    assert parked.apps() == ["a", "c"] and queries["b"].query.stopped
    assert not queries["a"].query.stopped and not queries["c"].query.stopped
