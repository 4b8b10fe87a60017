"""The warm engine (`kstool engine start|stop|status`): runs and state reads it hosts give what
runs of their own give, byte for byte; the client behaves as a run of its own (Ctrl-C stops
after the batch; killed, its query stops in the engine); an engine killed under a waiting
client fails it in one line, and a rerun without the engine goes on from the checkpoint."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kstool.engine.daemon.protocol import checked_heap
from tests.conftest import cli, cli_subprocess
from tests.faults import descendants
from tests.helpers import KSTOOL, as_long, create_topic, latest_per_key, produce_batched, produce_keyed, read_all, wait_until
from tests.oracles import word_counts as oracle
from tests.topologies.join_cases import STREAM_LEFT, STREAM_RIGHT, STREAM_STREAM


def _status() -> dict:
    result = cli("engine", "status", "-o", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(autouse=True)
def engine_wanted(monkeypatch):
    monkeypatch.setenv("KSTOOL_ENGINE", "on")  # tests/conftest.py keeps the other tests in process


@pytest.fixture(scope="module")
def engine(suite_kafka, jvm_archive):
    started = cli_subprocess("engine", "start", timeout=320)
    assert started.exit_code == 0, started.stderr
    yield _status()
    cli_subprocess("engine", "stop", timeout=620)


def _engine_log() -> str:
    return (Path(os.environ["KSTOOL_HOME"]) / "engine" / "engine.log").read_text(errors="replace")


def test_status_socket_is_private_and_one_engine_per_home(engine):
    assert engine["running"] and engine["pid"] > 0 and engine["runs"] == []
    assert engine["jvm_heap_used_bytes"] > 0 and engine["jvm_heap_max_bytes"] >= engine["jvm_heap_used_bytes"]
    if os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >= 8 * 2**30:  # more than Spark's 1g: 2g and up
        assert engine["jvm_heap_max_bytes"] > 1.5 * 2**30
    sock = Path(engine["socket"])
    assert stat.S_ISSOCK(sock.stat().st_mode)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600 and stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    second = cli("engine", "start")
    assert second.exit_code == 75 and f"already runs (pid {engine['pid']}" in second.stderr
    assert second.stderr.count("\n") == 1


def _records(kafka, topic: str) -> dict[tuple, list]:
    """Each key's updates in offset order, per partition, as bytes. Keys of one partition may
    interleave differently from run to run (the tasks of a batch write in parallel); one key's
    updates may not."""
    updates: dict[tuple, list] = {}
    for m in read_all(kafka, topic):
        updates.setdefault((m.partition(), m.key()), []).append((m.value(), m.timestamp()[1]))
    return updates


WORDS = [f"w{i % 23} w{i % 7} common" for i in range(400)]
TOPOLOGIES = {
    # name: (how the inputs are written, run arguments with {in} and {out} for the topics)
    "wordcount": (lambda kafka, t: (create_topic(kafka, t, 2),
                                    produce_batched(kafka, t, [(None, line.encode()) for line in WORDS])),
                  ("wordcount", "--input", "{in}", "--output", "{out}", "--max-records-per-batch", "150")),
    "tumbling": (lambda kafka, t: (create_topic(kafka, t, 1),
                                   produce_keyed(kafka, t, [("a", "1", 1), ("a", "1", 12), ("b", "1", 2),
                                                            ("a", "1", 16), ("a", "1", 4), ("b", "1", 25)])),
                 ("aggregate", "--input", "{in}", "--output", "{out}", "--window", "tumbling:10s", "--grace", "5s",
                  "--max-records-per-batch", "3")),
    "stream-stream": (lambda kafka, t: (create_topic(kafka, t + "-l", 1), create_topic(kafka, t + "-r", 1),
                                        produce_keyed(kafka, t + "-l", STREAM_LEFT),
                                        produce_keyed(kafka, t + "-r", STREAM_RIGHT)),
                      ("join", "--left", "{in}-l", "--right", "{in}-r", "--output", "{out}", *STREAM_STREAM,
                       "--how", "outer")),
}


@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_a_run_in_the_engine_writes_what_a_run_of_its_own_writes(kafka, spark, engine, topic_name, name):
    write_inputs, arguments = TOPOLOGIES[name]
    write_inputs(kafka, topic_name)
    outputs = {}
    for where, extra in (("engine", ()), ("own", ("--no-engine",))):
        app = f"{topic_name}-{where}"
        args = [a.format(**{"in": topic_name, "out": app + "-out"}) for a in arguments]
        result = cli("run", *args, "--app-id", app, "--once", *extra)
        assert result.exit_code == 0, result.stderr
        outputs[where] = _records(kafka, app + "-out")
        changelogs = sorted(t["topic"] for t in json.loads(cli("topics", "list", "-o", "json").stdout)
                            if t["topic"].startswith(app + "-") and t["topic"].endswith("-changelog"))
        outputs[where + " changelogs"] = [_records(kafka, t) for t in changelogs]
    assert outputs["engine"] and outputs["engine"] == outputs["own"]
    assert outputs["engine changelogs"] and outputs["engine changelogs"] == outputs["own changelogs"]
    assert f"{topic_name}-engine: run_app" in _engine_log()
    assert f"{topic_name}-own" not in _engine_log()


def test_a_run_through_a_secured_listener_keeps_its_secrets(engine, secured_cluster, monkeypatch):
    """SASL_SSL and SCRAM through a --command-config file: the engine's executors read and write
    with the file's settings; `state` and `reset` follow; no password in any output or the log."""
    monkeypatch.delenv("KSTOOL_BOOTSTRAP_SERVERS")  # the file's bootstrap.servers, not the suite's broker
    cluster = secured_cluster
    words, counts, app = (cluster.prefix + name for name in ("words", "counts", "wordcount"))
    create_topic(cluster.kafka, words, 2)
    alice = ["--command-config", str(cluster.properties("alice"))]
    assert cli(*alice, "produce", words, input="a b a\nc a\n").exit_code == 0
    ran = cli(*alice, "run", "wordcount", "--input", words, "--output", counts, "--app-id", app, "--once")
    assert ran.exit_code == 0, ran.stderr
    assert f"{app}: run_app" in _engine_log()
    got = cli(*alice, "--debug", "state", "get", "--app-id", app, "--from-changelog", "a", "c", "-o", "json")
    assert got.exit_code == 0, got.stderr
    assert {row["key"]: row["value"] for row in json.loads(got.stdout)} == {"a": 3, "c": 1}
    reset = cli(*alice, "reset", "--app-id", app, "--to-earliest", "--yes")
    assert reset.exit_code == 0, reset.stderr
    offsets = json.loads(cli(*alice, "groups", "describe", app, "-o", "json").stdout)["partitions"]
    assert [(p["topic"], p["committed"]) for p in offsets] == [(words, 0), (words, 0)]
    assert cluster.leaked(ran.stdout, ran.stderr, got.stderr, reset.stdout, reset.stderr, _engine_log()) == []


ROUNDS = {
    # name: (the input records, how they are written, partitions, run arguments)
    "wordcount": ([(None, line.encode()) for line in WORDS], produce_batched, 2,
                  ("wordcount", "--input", "{in}", "--output", "{out}", "--max-records-per-batch", "60")),
    # windows that the next round's records close (grace 5s): batches without input records emit them
    "tumbling": ([("a", "1", 1), ("a", "1", 12), ("b", "1", 2), ("a", "1", 16), ("a", "1", 4), ("b", "1", 25),
                  ("b", "1", 40), ("a", "1", 41), ("a", "1", 70)], produce_keyed, 1,
                 ("aggregate", "--input", "{in}", "--output", "{out}", "--window", "tumbling:10s", "--grace", "5s",
                  "--emit", "final")),
}


def _parked(app: str) -> bool:
    return any(Path(folder).name == app for folder in _status().get("parked", []))


@pytest.mark.parametrize("name", list(ROUNDS))
def test_the_engine_keeps_an_apps_query_between_runs_and_gives_it_up_for_other_uses(
        kafka, spark, engine, topic_name, name):
    """--once runs in the engine resume the query the first one left parked, and write what
    runs of their own write, round by round; a run of its own or a reset has the engine stop
    the parked query first, and the checkpoint goes on exactly."""
    records, produce, partitions, arguments = ROUNDS[name]
    create_topic(kafka, topic_name, partitions)
    engine_app, own_app = f"{topic_name}-engine", f"{topic_name}-own"

    def run(app: str, *extra: str) -> float:
        """The command's own time, in ms."""
        args = [a.format(**{"in": topic_name, "out": app + "-out"}) for a in arguments]
        began = time.monotonic()
        result = cli("run", *args, "--app-id", app, "--once", *extra)
        assert result.exit_code == 0, result.stderr
        return (time.monotonic() - began) * 1000

    rounds = [records[len(records) * i // 4:len(records) * (i + 1) // 4] for i in range(4)]
    for chunk in rounds[:3]:
        produce(kafka, topic_name, chunk)
        command_ms = run(engine_app)
        # a batch's duration is its own work, within the command's time (#84 saw a resumed
        # batch reported as 30.1 s in a 15.5 s command: its trigger's wait for the gate)
        last = json.loads((Path(os.environ["KSTOOL_HOME"]) / "apps" / engine_app / "metrics.jsonl")
                          .read_text().splitlines()[-1])
        assert last["duration_ms"] <= command_ms, (last, command_ms)
        run(own_app, "--no-engine")
        assert _records(kafka, engine_app + "-out") == _records(kafka, own_app + "-out")
    assert _engine_log().count(f"{engine_app}: resuming its parked query") == 2
    assert _parked(engine_app)

    produce(kafka, topic_name, rounds[3])
    run(engine_app, "--no-engine")  # takes the app over from the engine
    run(own_app, "--no-engine")
    assert f"{engine_app}: parked query stopped for another use of the app" in _engine_log()
    assert not _parked(engine_app)
    assert _records(kafka, engine_app + "-out") and _records(kafka, engine_app + "-out") == _records(
        kafka, own_app + "-out")
    if name == "wordcount":
        counts = {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, engine_app + "-out")).items()}
        assert counts == dict(oracle(WORDS))

    run(engine_app)  # parked again, then reset
    assert _parked(engine_app)
    reset = cli("reset", "--app-id", engine_app, "--to-earliest", "--yes")
    assert reset.exit_code == 0, reset.stderr
    assert not _parked(engine_app)
    assert not (Path(os.environ["KSTOOL_HOME"]) / "apps" / engine_app / "checkpoint").exists()


def test_ctrl_c_stops_a_parked_querys_run_after_its_batch(kafka, engine, topic_name):
    create_topic(kafka, topic_name, 2)
    words = WORDS[:110]
    produce_batched(kafka, topic_name, [(None, line.encode()) for line in words[:10]])
    app = topic_name + "-app"
    args = ["run", "wordcount", "--input", topic_name, "--output", app + "-out", "--app-id", app,
            "--max-records-per-batch", "10", "--once"]
    first = cli(*args)
    assert first.exit_code == 0 and _parked(app)
    # enough batches that the signal, sent once the first is out, lands before the last
    produce_batched(kafka, topic_name, [(None, line.encode()) for line in words[10:]])  # 10 batches
    client = subprocess.Popen([*KSTOOL, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(client.stderr), daemon=True)
    reader.start()

    def first_batch_reported() -> bool:  # the client's own line: its Ctrl-C handler is in place
        if any(f"kstool: {app}: batch " in line for line in lines):
            return True
        assert client.poll() is None, f"the client ended ({client.returncode}) first: {lines[-3:]}"
        return False
    wait_until(first_batch_reported, lambda: f"the second run's first batch; it printed {lines[-3:]}")
    client.send_signal(signal.SIGINT)
    client.wait(180)
    reader.join(30)
    stderr = "".join(lines)
    # bounded work cut short is not done: cron sees 130, and where the app stands
    assert client.returncode == 130 and "stopping after the current batch" in stderr, stderr
    summary_line, interrupted = stderr.strip().splitlines()[-2:]
    assert interrupted.startswith(f"kstool: interrupted: {app} stopped after batch ")
    assert interrupted.endswith("record(s) left to read; run the same command to go on from there"), interrupted
    batches = int(summary_line.split(f"kstool: {app}: ")[1].split(" batch")[0])
    assert 1 <= batches < len(words[10:]) // 10
    assert _parked(app)
    rerun = cli(*args)
    assert rerun.exit_code == 0, rerun.stderr
    counts = {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, app + "-out")).items()}
    assert counts == dict(oracle(words))
    said = [int(run.strip().splitlines()[-1].split(" records in")[0].rsplit(" ", 1)[1])
            for run in (first.stderr, summary_line, rerun.stderr)]
    assert sum(said) == len(words), f"the three runs' summaries say {said} records"


def _source_processes(engine_pid: int) -> set[int]:
    """Spark's streaming source processes under the engine: one per query, parked ones too."""
    def runs_the_source(pid: int) -> bool:
        try:
            return b"python_streaming_source_runner" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
    return {pid for pid in descendants(engine_pid) if runs_the_source(pid)}


def test_a_run_whose_source_process_dies_starts_its_query_again(kafka, engine, topic_name):
    # seen in a full test run: the source process of a parked query died of a segfault mid-run
    create_topic(kafka, topic_name, 2)
    words = WORDS[:100]  # 10 batches: the kill, after the second, lands before the last
    produce_batched(kafka, topic_name, [(None, line.encode()) for line in words])
    app = topic_name + "-app"
    before = _source_processes(engine["pid"])
    client = subprocess.Popen([*KSTOOL, "run", "wordcount", "--input", topic_name, "--output", app + "-out",
                               "--app-id", app, "--max-records-per-batch", "10", "--once"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(client.stderr), daemon=True)
    reader.start()
    wait_until(lambda: any(": batch 1 |" in line for line in lines) or client.poll() is not None,
               lambda: f"the run's second batch; it printed {lines[-3:]}")
    new = _source_processes(engine["pid"]) - before
    assert client.poll() is None and len(new) == 1, (new, lines[-3:])
    os.kill(new.pop(), signal.SIGKILL)
    client.wait(300)
    reader.join(30)
    stderr = "".join(lines)
    assert client.returncode == 0, stderr
    assert "the query's Python source process died" in stderr and "starting the query again" in stderr
    # every batch is counted once: the batch in flight at the death ran again under its id
    summary = stderr.strip().splitlines()[-1]
    assert f" {len(words)} records in" in summary, summary
    counts = {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, app + "-out")).items()}
    assert counts == dict(oracle(words))


def test_state_reads_in_the_engine_match_reads_of_their_own(kafka, spark, engine, topic_name):
    create_topic(kafka, topic_name, 2)
    produce_batched(kafka, topic_name, [(None, line.encode()) for line in WORDS])
    app = topic_name + "-app"
    assert cli("run", "wordcount", "--input", topic_name, "--output", app + "-out", "--app-id", app,
               "--once").exit_code == 0
    # the last: a batch the checkpoint has not committed, refused where the checkpoint is opened
    for query in (("get", "common", "w1", "nope"), ("all",), ("range", "--from", "w1", "--to", "w3"),
                  ("changes", "--from-batch", "0"), ("get", "common", "--batch-id", "999")):
        hosted = cli("state", *query, "--app-id", app, "-o", "json")
        own = cli("state", *query, "--app-id", app, "-o", "json", "--no-engine")
        assert (hosted.exit_code, hosted.stdout, hosted.stderr) == (own.exit_code, own.stdout, own.stderr)
    assert json.loads(cli("state", "get", "common", "--app-id", app, "-o", "json").stdout)[0]["value"] == len(WORDS)
    assert f"state of {app}: read_checkpoint" in _engine_log()


def test_the_client_imports_neither_pyspark_nor_pandas(kafka, engine, topic_name):
    create_topic(kafka, topic_name, 1)
    produce_batched(kafka, topic_name, [(None, b"a b a")])
    app = topic_name + "-app"
    script = ("import json, sys\nfrom kstool.commands.main import run\n"
              f"code = run(['run', 'wordcount', '--input', {topic_name!r}, '--output', {app + '-out'!r}, "
              f"'--app-id', {app!r}, '--once', '-q'])\n"
              "print(json.dumps([code, 'pyspark' in sys.modules, 'pandas' in sys.modules]))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert json.loads(proc.stdout.splitlines()[-1]) == [0, False, False], proc.stderr
    assert {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, app + "-out")).items()} == {"a": 2, "b": 1}


def test_a_hosted_run_fails_as_a_run_of_its_own_does(kafka, engine, topic_name):
    """The error crosses the socket with its exit code and exactly its message (TopicNotFoundError
    builds its message from the topic name: pickled as it is, it would come back garbled)."""
    args = ("run", "wordcount", "--input", topic_name + "-missing", "--output", topic_name + "-out",
            "--app-id", topic_name + "-app", "--once")
    hosted, own = cli(*args), cli(*args, "--no-engine")
    assert (hosted.exit_code, hosted.stderr) == (own.exit_code, own.stderr)
    assert hosted.exit_code == 1 and hosted.stderr == f"kstool: error: topic '{topic_name}-missing' does not exist\n"
    assert f"{topic_name}-app: run_app" in _engine_log()
    debug = cli(*args, "--debug")  # Spark's log is only a Spark of the command's own to show
    assert debug.exit_code == 1 and "running without the engine: --debug" in debug.stderr


def _continuous(topic_name: str, app: str) -> subprocess.Popen:
    return subprocess.Popen([*KSTOOL, "run", "wordcount", "--input", topic_name, "--output", app + "-out",
                             "--app-id", app, "--trigger", "300ms"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _hosting(app: str) -> bool:
    return any(run["name"] == app for run in _status()["runs"])


def _wrote_output(kafka, app: str) -> bool:
    try:
        return bool(read_all(kafka, app + "-out"))
    except KeyError:  # not created yet
        return False


def _wait_for_first_output(kafka, app: str, client: subprocess.Popen) -> None:
    """Fails at once when the client ends first; on a hang, with the end of the engine's log."""
    def written() -> bool:
        assert client.poll() is None, f"the client ended ({client.returncode}) first: {client.communicate()[1]}"
        return _wrote_output(kafka, app)

    def stalled() -> str:
        kstool_lines = [line for line in _engine_log().splitlines() if " py4j." not in line]
        return f"the first output of {app}; the engine's log ends:\n" + "\n".join(kstool_lines[-25:])
    wait_until(written, stalled)


def test_ctrl_c_stops_the_hosted_run_after_its_batch(kafka, engine, topic_name):
    create_topic(kafka, topic_name, 2)
    produce_batched(kafka, topic_name, [(None, line.encode()) for line in WORDS])
    app = topic_name + "-app"
    client = _continuous(topic_name, app)
    _wait_for_first_output(kafka, app, client)
    # the app's process is the client; the engine, hosting every app, is named beside it
    listed = {row["app_id"]: row for row in json.loads(cli("apps", "list", "-o", "json").stdout)}
    assert (listed[app]["running_pid"], listed[app]["engine_pid"]) == (client.pid, _status()["pid"])
    described = cli("apps", "describe", app, "--offline")
    assert f"running (pid {client.pid}, in the warm engine, pid {_status()['pid']})" in described.stdout
    client.send_signal(signal.SIGINT)
    _, stderr = client.communicate(timeout=180)
    assert client.returncode == 0, stderr
    assert "stopping after the current batch" in stderr and "Traceback" not in stderr
    wait_until(lambda: not _hosting(app), "the engine to finish the run")
    counts = {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, app + "-out")).items()}
    assert counts == dict(oracle(WORDS))


def test_a_killed_client_stops_its_query_in_the_engine(kafka, engine, topic_name):
    create_topic(kafka, topic_name, 2)
    produce_batched(kafka, topic_name, [(None, line.encode()) for line in WORDS[:200]])
    app = topic_name + "-app"
    client = _continuous(topic_name, app)
    _wait_for_first_output(kafka, app, client)
    assert _hosting(app)
    client.kill()
    client.wait(30)
    wait_until(lambda: not _hosting(app), "the engine to stop the orphaned query")
    # the app is free again (no lock left behind), and a rerun finishes the input exactly
    produce_batched(kafka, topic_name, [(None, line.encode()) for line in WORDS[200:]])
    rerun = cli("run", "wordcount", "--input", topic_name, "--output", app + "-out", "--app-id", app, "--once")
    assert rerun.exit_code == 0, rerun.stderr
    counts = {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, app + "-out")).items()}
    assert counts == dict(oracle(WORDS))


def test_engine_stop_lets_each_of_its_runs_finish_its_batch(kafka, engine, topic_name):
    """Two continuous apps at once, with different shuffle partition counts (their inputs'),
    each in its own session of the engine; `engine stop` ends both after their batch, and each
    client exits 75 (EX_TEMPFAIL: a supervisor restarts it) saying why."""
    apps = {}
    for partitions in (2, 3):
        source = f"{topic_name}-{partitions}"
        create_topic(kafka, source, partitions)
        produce_batched(kafka, source, [(None, line.encode()) for line in WORDS])
        apps[source + "-app"] = _continuous(source, source + "-app")
    for app, client in apps.items():
        _wait_for_first_output(kafka, app, client)
    assert all(_hosting(app) for app in apps), _status()
    stopped = cli("engine", "stop")
    assert stopped.exit_code == 0 and f"(pid {engine['pid']}) stopped" in stopped.stderr
    for app, client in apps.items():
        _, stderr = client.communicate(timeout=60)
        assert client.returncode == 75 and "stopping after the current batch" in stderr, stderr
        assert stderr.strip().splitlines()[-1] == (
            f"kstool: error: {app} stopped after its current batch because the warm engine hosting it was "
            "stopped (`kstool engine stop`); the same command goes on from there")
        counts = {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, app + "-out")).items()}
        assert counts == dict(oracle(WORDS))
    assert _status() == {"running": False}
    assert cli_subprocess("engine", "start", timeout=320).exit_code == 0  # for the next test


def test_an_engine_killed_under_a_waiting_client_fails_it_and_the_next_run_starts_a_new_one(
        kafka, spark, engine, topic_name):
    """The last test of the module: it kills the engine; the rerun starts another (stopped by
    the module's fixture) and goes on from the checkpoint."""
    create_topic(kafka, topic_name, 2)
    produce_batched(kafka, topic_name, [(None, line.encode()) for line in WORDS[:200]])
    app = topic_name + "-app"
    client = _continuous(topic_name, app)
    _wait_for_first_output(kafka, app, client)
    killed = _status()["pid"]
    os.killpg(killed, signal.SIGKILL)  # the engine, its Spark JVM and Python workers
    _, stderr = client.communicate(timeout=60)
    assert client.returncode == 1
    assert stderr.strip().splitlines()[-1].startswith(f"kstool: error: the engine stopped while running {app}")
    assert "Traceback" not in stderr
    assert _status() == {"running": False}
    produce_batched(kafka, topic_name, [(None, line.encode()) for line in WORDS[200:]])
    rerun = cli("run", "wordcount", "--input", topic_name, "--output", app + "-out", "--app-id", app, "--once")
    assert rerun.exit_code == 0, rerun.stderr
    assert "started the warm engine" in rerun.stderr and _status()["pid"] != killed
    counts = {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, app + "-out")).items()}
    assert counts == dict(oracle(WORDS))


@pytest.mark.parametrize("size, says", [
    # Spark's UnifiedMemoryManager.getMaxMemory refuses a driver heap under 1.5 x its 300 MiB
    # reserve (INVALID_DRIVER_MEMORY.SYSTEM_MEMORY: "System memory 314572800 must be at least
    # 471859200", seen with 300m)
    ("300m", "--driver-memory 300m: too small, Spark's driver needs at least 480m"),
    ("100000k", "--driver-memory 100000k: too small, Spark's driver needs at least 480m"),
    ("4x", "--driver-memory '4x': not a size (e.g. 4g or 512m)"),
    # Spark's launcher passes the size on as -Xmx<size>: without a unit the JVM reads bytes
    ("2048", "--driver-memory '2048': not a size (e.g. 4g or 512m)"),
])
def test_a_heap_spark_would_refuse_is_refused_before_an_engine_starts(size, says, tmp_path, monkeypatch):
    monkeypatch.setenv("KSTOOL_HOME", str(tmp_path))
    result = cli("engine", "start", "--driver-memory", size)
    assert (result.exit_code, result.stderr.strip()) == (2, f"kstool: error: {says}")
    assert not _status()["running"]


@pytest.mark.parametrize("size", ["480m", "1g", "4G", "1048576k"])
def test_a_heap_spark_takes_is_passed_on_as_given(size):
    assert checked_heap(size) == size
