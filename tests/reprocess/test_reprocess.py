"""kstool reprocess: from a time that is aligned to nothing, every key and window ends as one
fresh run over the whole input ends (the oracle), for each kind of store; the plan changes
nothing; a lost history is refused with the ways on; a run that stops midway is finished by
running the same command again.

The inputs are written by a normally batching producer (multi-record batches), in two parts:
the app runs over the first in several batches, the second arrives after that run."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.conftest import cli
from tests.helpers import KSTOOL, T0, app_digest, create_topic, end_in_process_runs, read_all, wait_until

KEYS = 6
FIRST, LATER = 200, 40  # records per input before the first run, and after it
CUT = 101  # --from-time: half a second after the CUT-th record's time


def _write(kafka, topic: str, records) -> None:
    """records: (key, value, timestamp ms); key kN goes to partition N % 2 (co-partitioned)."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 20})
    for key, value, ts in records:
        producer.produce(topic, key=key.encode(), value=value.encode(), timestamp=ts,
                         partition=int(key[1:]) % 2)
    assert producer.flush(30) == 0


def _stamp(i: int, sessions: bool) -> int:
    # sessions: bursts of ten records a second apart, 40 s between bursts
    return T0 + ((i // 10) * 40_000 + (i % 10) * 1000 if sessions else i * 1000)


def _inputs(kind: str, count: int, start: int = 0) -> dict[str, list]:
    sessions = kind == "session"
    rows = range(start, start + count)
    if kind.startswith("join"):
        table = [(f"k{i % KEYS}", f"c{i}", _stamp(i, False)) for i in rows]
        stream = [(f"k{i % KEYS}", f"o{i}", _stamp(i, False) + 500) for i in rows]
        return {"left": stream, "right": table}
    sums = lambda i: str(i % 13)  # noqa: E731
    value = {"wordcount": lambda i: f"w{i % 5} x{i % 3} k{i % 4}", "sum": sums, "hopping": sums}.get(kind, lambda i: "1")
    return {"input": [(f"k{i % KEYS}", value(i), _stamp(i, sessions)) for i in rows]}


# one run per store layout the rollback rewinds: a key-value store (wordcount; a plain sum is the
# same layout), time windows (hopping: a record in several windows; tumbling is its one-window
# case, and a window cut by the time is rewritten whole either way), sessions, and each join's
# stores: each kind costs the suite ~30 CPU-s (three Spark runs)
RUNS = {
    "wordcount": ["run", "wordcount", "--input", "{input}"],
    "hopping": ["run", "aggregate", "--input", "{input}", "--agg", "sum", "--window", "hopping:30s,10s",
                "--processing-guarantee", "exactly_once_v2"],
    "session": ["run", "aggregate", "--input", "{input}", "--window", "session:15s"],
    "join-stream-table": ["run", "join", "--kind", "stream-table", "--how", "left", "--left", "{left}",
                          "--right", "{right}"],
    "join-table-table": ["run", "join", "--kind", "table-table", "--how", "outer", "--left", "{left}",
                         "--right", "{right}"],
}


def _run(kind: str, topics: dict[str, str], output: str, app: str, *extra: str):
    args = [a.format(**topics) for a in RUNS[kind]]
    return cli(*args, "--output", output, "--app-id", app, "--once", *extra)


def _final(kafka, topic: str) -> dict:
    """The last value per (partition, key), with its timestamp: what a reader of the output keeps."""
    latest = {}
    for msg in read_all(kafka, topic):
        latest[(msg.partition(), msg.key())] = (msg.value(), msg.timestamp()[1])
    return {k: v for k, v in latest.items() if v[0] is not None}


def _ends(kafka, topic: str) -> dict[int, int]:
    """Each partition's end, by reading (the embedded broker reports batched writes' ends too low)."""
    ends: dict[int, int] = {}
    for msg in read_all(kafka, topic):
        ends[msg.partition()] = msg.offset() + 1
    return ends


def _group(app: str) -> dict:
    doc = json.loads(cli("groups", "describe", app, "-o", "json").stdout)
    return {(p["topic"], p["partition"]): p["committed"] for p in doc["partitions"]}


def _topics() -> list[str]:
    return sorted(t["topic"] for t in json.loads(cli("topics", "list", "-o", "json").stdout))


def _app_folder(app: str) -> Path:
    from kstool.application.model import default_state_dir

    return default_state_dir() / app


@pytest.mark.parametrize("kind", list(RUNS))
def test_reprocess_from_an_unaligned_time_ends_as_one_fresh_run(kafka, spark, topic_name, kind):
    topics = {role: f"{topic_name}-{role}" for role in _inputs(kind, 1)}
    for topic in topics.values():
        create_topic(kafka, topic, 2)
    for role, records in _inputs(kind, FIRST).items():
        _write(kafka, topics[role], records)
    app, output = f"{topic_name}-app", f"{topic_name}-out"
    first = _run(kind, topics, output, app, "--max-records-per-batch", "60", "--report", "json")
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout)["batches"] >= 4  # several batches before and after the cut
    for role, records in _inputs(kind, LATER, start=FIRST).items():
        _write(kafka, topics[role], records)

    cut = _stamp(CUT, kind == "session") + 500
    before = (app_digest(_app_folder(app)), _group(app), _ends(kafka, output), _topics())
    plan = cli("reprocess", "--app-id", app, "--from-time", f"@{cut}", "--dry-run", "-o", "json")
    assert plan.exit_code == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert planned["dry_run"] and planned["mode"] == "rollback" and planned["refusal"] is None
    assert planned["restart_batch"] is not None and planned["batches_undone"] >= 1
    assert (app_digest(_app_folder(app)), _group(app), _ends(kafka, output), _topics()) == before, \
        "--dry-run changed something"

    done = cli("reprocess", "--app-id", app, "--from-time", f"@{cut}", "--yes", "-o", "json")
    assert done.exit_code == 0, done.stderr
    result = json.loads(done.stdout)
    restarted = {(p["topic"], p["partition"]): p["restart"] for p in result["partitions"]}
    assert result["run"]["input_records"] == sum(_ends(kafka, t)[p] - o for (t, p), o in restarted.items())
    for p in result["partitions"]:  # the restart is at or before the first record at or after the cut
        assert p["restart"] <= p["from_time_offset"]

    oracle_output = f"{topic_name}-oracle"
    fresh = _run(kind, topics, oracle_output, f"{topic_name}-oracle")
    assert fresh.exit_code == 0, fresh.stderr
    expected = _final(kafka, oracle_output)
    assert expected and _final(kafka, output) == expected
    assert _group(app) == _group(f"{topic_name}-oracle")


def test_a_lost_history_is_refused_with_the_ways_on_and_from_beginning_is_exact(kafka, spark, topic_name):
    source, output, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 2)
    _write(kafka, source, _inputs("sum", FIRST)["input"])
    run = cli("run", "aggregate", "--input", source, "--output", output, "--app-id", app, "--agg", "sum", "--once",
              "--max-records-per-batch", "20", "--history-batches", "2")
    assert run.exit_code == 0, run.stderr
    assert json.loads(cli("apps", "describe", app, "-o", "json").stdout)["history"]["kept_batches"] == 2
    before = (app_digest(_app_folder(app)), _group(app), _ends(kafka, output))
    refused = cli("reprocess", "--app-id", app, "--from-time", f"@{_stamp(30, False)}", "--yes")
    assert refused.exit_code == 1
    error = refused.stderr.strip().splitlines()[-1]
    assert "is gone" in error and "keeps batches" in error and "--from-beginning" in error and "--accept-partial" in error
    first, last, count = map(int, re.search(r"keeps batches (\d+)\.\.(\d+) \((\d+) batches", error).groups())
    assert count == last - first + 1  # what it names, counted right (not "the last 2" of three)
    assert refused.stdout.startswith(f"reprocess of {app} REFUSED, nothing was changed")  # not a plan to carry out
    assert "STEPS" not in refused.stdout
    assert (app_digest(_app_folder(app)), _group(app), _ends(kafka, output)) == before

    rebuilt = cli("reprocess", "--app-id", app, "--from-beginning", "--yes", "-o", "json")
    assert rebuilt.exit_code == 0, rebuilt.stderr
    assert json.loads(rebuilt.stdout)["run"]["input_records"] == FIRST
    assert cli("run", "aggregate", "--input", source, "--output", output + "-oracle", "--app-id", app + "-oracle",
               "--agg", "sum", "--once").exit_code == 0
    assert _final(kafka, output) == _final(kafka, output + "-oracle")


def test_a_reprocess_that_stops_midway_is_finished_by_resuming_it(kafka, spark, topic_name):
    """The app skips bad records (--on-error skip, kept in its manifest): a reprocess told to
    fail stops at the bad record after its first batches; `--resume` runs on with the app's
    own settings from where it stopped and ends as the oracle."""
    source, output, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 2)
    records = _inputs("wordcount", FIRST)["input"]
    _write(kafka, source, records[:150])
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    producer.produce(source, key=b"k0", value=b"\xff\xfe not utf-8", timestamp=_stamp(150, False), partition=0)
    assert producer.flush(10) == 0
    _write(kafka, source, records[150:])
    args = ["--input", source, "--output", output, "--app-id", app, "--once", "--max-records-per-batch", "40"]
    assert cli("run", "wordcount", *args, "--on-error", "skip").exit_code == 0

    cut = f"@{_stamp(CUT, False) + 500}"
    stopped = cli("reprocess", "--app-id", app, "--from-time", cut, "--yes", "--on-error", "fail")
    assert stopped.exit_code == 1
    line = stopped.stderr.strip().splitlines()[-1]
    assert "stopped" in line and "stands at batch" in line, line
    assert line.endswith(f"`kstool reprocess --app-id {app} --resume` finishes it (the same reprocess again "
                         "would start over)"), line
    finished = cli("reprocess", "--app-id", app, "--resume", "--yes", "-o", "json")
    assert finished.exit_code == 0, finished.stderr
    assert json.loads(finished.stdout)["steps"][0]["step"] == "run once"  # nothing rolled back again
    assert cli("run", "wordcount", "--input", source, "--output", output + "-oracle", "--app-id", app + "-oracle",
               "--once", "--on-error", "skip").exit_code == 0
    assert _final(kafka, output) == _final(kafka, output + "-oracle")


def test_a_reprocess_cut_short_by_sigterm_exits_143_saying_where_the_app_stands(kafka, spark, topic_name):
    """Cron's `kstool reprocess ... || alert` must fire when a signal cut the work short (it
    exited 0 with most of the input left), and `--resume` then reads only what was left (the
    same reprocess again rolled back and rewrote everything, #84)."""
    source, output, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 2)
    _write(kafka, source, _inputs("wordcount", FIRST)["input"])
    assert cli("run", "wordcount", "--input", source, "--output", output, "--once", "--app-id", app).exit_code == 0
    end_in_process_runs()  # a user's run --once exited before the reprocess: it rolls back the checkpoint
    # small batches while the signal comes, so that most of the input is left; large ones to finish
    cut_short, finish = ["--app-id", app, "--max-records-per-batch", "5"], ["--app-id", app, "--max-records-per-batch", "1000"]
    reprocess = [*KSTOOL, "reprocess", *cut_short, "--from-time", f"@{T0}", "--yes"]
    proc = subprocess.Popen(reprocess, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    wait_until(lambda: any(f"kstool: {app}: batch " in line for line in lines) or proc.poll() is not None,
               lambda: f"the reprocess's first batch; it printed {lines[-3:]}")
    proc.send_signal(signal.SIGTERM)
    proc.wait(180)
    reader.join(30)
    assert proc.returncode == 143, "".join(lines[-3:])
    last = lines[-1].strip()
    assert last.startswith(f"kstool: interrupted: {app} stopped after batch ") and "left to read" in last, last
    assert last.endswith("--resume` finishes it (the same reprocess again would start over)"), last
    assert not any("reprocessed from" in line for line in lines), "no line says it was done"
    left = int(re.search(r"with (\d+) record\(s\) left to read", last).group(1))
    finished = cli("reprocess", *finish, "--resume", "--yes", "-o", "json")
    assert finished.exit_code == 0, finished.stderr
    assert json.loads(finished.stdout)["run"]["input_records"] == left
    again = cli("reprocess", *finish, "--resume", "--yes")
    assert again.exit_code == 1 and f"app {app!r} has no unfinished reprocess to resume" in again.stderr
    assert cli("run", "wordcount", "--input", source, "--output", output + "-oracle", "--app-id", app + "-oracle",
               "--once").exit_code == 0
    assert _final(kafka, output) == _final(kafka, output + "-oracle")


def test_a_stop_after_the_reprocess_read_everything_cuts_nothing_short(kafka, spark, topic_name):
    """A stop asked once the reprocess' last batch had read everything (lag 0) exited 130 with
    "run the same reprocess again", which rolled back and rewrote it all (#84): it is finished,
    and nothing is left to resume."""
    from kstool.application.model import AppPaths, default_state_dir
    from kstool.config import build_client_config
    from kstool.engine.progress import Silent
    from kstool.engine.query.options import RunOptions
    from kstool.engine.stopping import hosted
    from kstool.kafka.client import KafkaClients
    from kstool.reprocess.apply import reprocess
    from kstool.reprocess.plan import build_plan

    source, output, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 2)
    _write(kafka, source, _inputs("wordcount", 40)["input"])
    assert cli("run", "wordcount", "--input", source, "--output", output, "--app-id", app, "--once").exit_code == 0
    stop = threading.Event()

    class StopOnceCaughtUp(Silent):  # as a Ctrl-C right after the last batch
        def batch(self, status) -> None:
            if status.lag == 0:
                stop.set()
    clients = KafkaClients(build_client_config(kafka.bootstrap))
    paths = AppPaths(default_state_dir(), app)
    with hosted(stop):
        result = reprocess(clients, build_plan(clients, paths, T0), RunOptions(app, paths.state_dir,
                           max_records_per_batch=10), StopOnceCaughtUp())
    # on a busy machine the query may end by itself before the loop sees the stop: then the run
    # was not cut at all, and the same holds (finished, nothing to resume)
    assert stop.is_set() and result.finished and result.run.input_records == 40
    resumed = cli("reprocess", "--app-id", app, "--resume", "--yes")
    assert resumed.exit_code == 1 and "has no unfinished reprocess to resume" in resumed.stderr


@pytest.mark.embedded_tier
def test_the_plan_names_every_step_and_says_when_there_is_nothing_to_do(kafka, spark, topic_name):
    """A new operator's reading of the plan: nothing to do after the last record (it planned 'undoing
    0 batches' and ran), each destructive step listed, a dry run while the app runs, --tz, -q."""
    from kstool.application.model import AppLock, AppPaths, default_state_dir

    source, output, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 2)
    _write(kafka, source, _inputs("wordcount", 40)["input"])
    assert cli("run", "wordcount", "--input", source, "--output", output, "--app-id", app, "--once",
               "--max-records-per-batch", "4").exit_code == 0
    before = (app_digest(_app_folder(app)), _group(app), _ends(kafka, output))

    late = cli("reprocess", "--app-id", app, "--from-time", "2030-01-01", "--yes")
    assert late.exit_code == 0, late.stderr
    assert late.stdout.startswith(f"reprocess plan for {app}: nothing to do")
    assert "is at or after 2030-01-01T00:00:00.000Z: nothing to reprocess" in late.stdout
    assert late.stderr == "nothing was changed\n" and "STEPS" not in late.stdout
    assert json.loads(cli("reprocess", "--app-id", app, "--from-time", "2030-01-01", "--yes", "-o", "json")
                      .stdout)["nothing_to_do"] is True
    assert (app_digest(_app_folder(app)), _group(app), _ends(kafka, output)) == before

    with AppLock(AppPaths(default_state_dir(), app), on_taken=None):  # the app runs: a dry run still shows the plan
        dry = cli("reprocess", "--app-id", app, "--from-beginning", "--dry-run", "-o", "json")
        assert cli("reprocess", "--app-id", app, "--from-beginning", "--yes").exit_code == 75
    assert dry.exit_code == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert any(note.startswith("the app is running (pid ") for note in plan["notes"])
    steps = [(s["step"], s["target"]) for s in plan["steps"]]
    assert steps[0] == ("move the group's offsets", f"{app}: to each partition's restart")
    assert ("delete topic", f"{app}-counts-changelog") in steps
    assert ("delete local state", str(_app_folder(app))) in steps
    assert steps[-2:] == [("append to topic", output), ("append to topic", f"{app}-counts-changelog")]

    paris = cli("reprocess", "--app-id", app, "--from-time", f"@{T0 + 10_000}", "--dry-run", "--tz", "Europe/Paris")
    assert paris.exit_code == 0, paris.stderr
    assert re.search(r" 2026-01-01T01:00:\d\d\.000\+01:00\n", paris.stdout) and "00.000Z" not in paris.stdout
    assert "STEPS, IN ORDER" in paris.stdout and "delete checkpoint files" in paris.stdout
    assert (app_digest(_app_folder(app)), _group(app), _ends(kafka, output)) == before

    quiet = cli("reprocess", "--app-id", app, "--from-time", f"@{T0 + 10_000}", "--yes", "-q")  # cron's line
    assert (quiet.exit_code, quiet.stdout, quiet.stderr) == (0, "", "")
    options = cli("reprocess", "--help").stdout
    assert "--trigger" not in options and "--from [" not in options and "--from-time" in options


def test_a_rollback_stopped_anywhere_leaves_a_checkpoint_spark_goes_on_from(tmp_path):
    """rollback_files' order: however many of its deletions happened, the checkpoint's last
    offsets entry is at most one batch past its last commit, that batch's state is complete, and
    no state version is left past the batch it would be run again as."""
    from kstool.checkpoint.location import LocalCheckpoint
    from kstool.checkpoint.logs import last_committed_batch, missing_state, rollback_files

    meta = json.dumps({"batchTimestampMs": 1, "conf": {"spark.sql.shuffle.partitions": "2"}})
    for batch in range(6):
        for log in ("offsets", "commits"):
            (tmp_path / log).mkdir(exist_ok=True)
            (tmp_path / log / str(batch)).write_text(f"v1\n{meta}\n{{}}\n")
            (tmp_path / log / f".{batch}.crc").write_text("")
        for partition in range(2):
            folder = tmp_path / "state" / "0" / str(partition)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{batch + 1}.changelog").write_text("")
            if batch + 1 in (1, 4):
                (folder / f"{batch + 1}.zip").write_text("")
    checkpoint = LocalCheckpoint("", tmp_path)
    files = rollback_files(checkpoint, 2)
    assert files[0] == "commits/.5.crc" and files[-1] == "offsets/3"
    for removed in range(len(files) + 1):
        for name in files[removed - 1:removed] if removed else []:
            checkpoint.remove(name)
        committed = last_committed_batch(checkpoint)
        planned = max(int(n) for n in checkpoint.names("offsets") if n.isdigit())
        assert committed is not None and planned - committed in (0, 1)
        assert missing_state(checkpoint, committed) == []
        versions = {int(n.split(".")[0]) for p in ("0", "1") for n in checkpoint.names(f"state/0/{p}")}
        assert max(versions) <= planned + 1
    assert last_committed_batch(checkpoint) == 2 and checkpoint.names("offsets")[-1] == "2"
