"""wordcount end to end on real Spark and the real broker."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time

import pytest
from confluent_kafka.admin import AdminClient

from tests.conftest import cli
from tests.helpers import (
    KSTOOL,
    as_long,
    create_topic,
    end_offsets,
    latest_per_key,
    produce_keyed,
    produce_values,
    read_all,
    source_rows,
    wait_until,
)
from tests.oracles import word_counts as oracle

CORPUS = [
    "Hello, world! Hello again.",
    "",
    "Grüße aus Köln: Straße, STRASSE; straße?",
    "日本語 のテキスト 日本語",
    "don't stop -- can't stop   won't stop",
    "numbers 42 and 4_2 and 42",
    "   ",
    "ΣΊΣΥΦΟΣ σίσυφος",
    " ".join(["long"] * 5000 + ["tail"]),
    "émigré café naïve CAFÉ",
]


def output_counts(kafka, topic) -> dict[str, int]:
    return {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, topic)).items()}


def run_once(app, source, sink, *extra):
    result = cli("run", "wordcount", "--input", source, "--output", sink, "--app-id", app,
                 "--once", "--report", "json", *extra)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.embedded_tier
def test_wordcount_counts_changelog_and_lag(kafka, spark, topic_name):
    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 2)
    produce_values(kafka, source, [line.encode() for line in CORPUS[:5]], partition=0)
    produce_values(kafka, source, [line.encode() for line in CORPUS[5:]], partition=1)
    summary = run_once(app, source, sink)
    assert summary["input_records"] == len(CORPUS)
    expected = oracle(CORPUS)
    assert output_counts(kafka, sink) == dict(expected)

    group = json.loads(cli("groups", "describe", app, "-o", "json").stdout)
    assert group["total_lag"] == 0
    assert {p["partition"]: p["committed"] for p in group["partitions"]} == end_offsets(kafka, source)

    changelog = f"{app}-counts-changelog"
    described = json.loads(cli("topics", "describe", changelog, "-o", "json").stdout)
    assert described["configs"].get("cleanup.policy") == "compact"
    assert output_counts(kafka, changelog) == dict(expected)
    # changelog tooling decodes it with the formats from the app's manifest
    dumped = json.loads(cli("changelog", "dump", changelog, "--compact", "-o", "json").stdout)
    assert {r["key"]: r["value"] for r in dumped} == dict(expected)

    # more input: totals are cumulative, and the new batch carries only the changed words
    before = end_offsets(kafka, sink)
    more = ["hello café", "brand new words"]
    produce_values(kafka, source, [line.encode() for line in more], partition=0)
    run_once(app, source, sink)
    assert output_counts(kafka, sink) == dict(oracle(CORPUS + more))
    new_records = [m for m in read_all(kafka, sink) if m.offset() >= before[m.partition()]]
    assert sorted(m.key().decode() for m in new_records) == sorted(oracle(more))
    totals = oracle(CORPUS + more)
    assert all(as_long(m.value()) == totals[m.key().decode()] for m in new_records)


def test_counts_carry_the_headers_of_the_last_line_with_the_word(kafka, spark, topic_name):
    """As Kafka Streams forwards the record that updated a count (its record cache keeps the last
    one's context): a word's count has the headers of the last line holding it, none when that
    line had none (lines without headers are counted where the source reads them), and later
    runs' lines take over; the changelog's records carry none."""
    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 1)
    produce_keyed(kafka, source, [(None, "a b", 1, [("line", b"1")]), (None, "b c", 2),
                                  (None, "a", 3, [("line", b"3"), ("empty", None)])])
    run_once(app, source, sink)
    first = {m.key().decode(): m.headers() for m in read_all(kafka, sink)}
    assert first == {"a": [("line", b"3"), ("empty", None)], "b": None, "c": None}
    produce_keyed(kafka, source, [(None, "C", 4, [("line", b"4")]), (None, "b", 5)])
    run_once(app, source, sink)
    assert {m.key().decode(): (as_long(m.value()), m.headers()) for m in read_all(kafka, sink)} == {
        "a": (2, [("line", b"3"), ("empty", None)]), "b": (3, None), "c": (2, [("line", b"4")])}
    assert all(m.headers() is None for m in read_all(kafka, f"{app}-counts-changelog"))


def test_value_format_string(kafka, spark, topic_name):
    source, sink = topic_name, topic_name + "-out"
    create_topic(kafka, source, 1)
    produce_values(kafka, source, [b"a b a"])
    run_once(topic_name + "-app", source, sink, "--value-format", "string")
    assert {k: v for k, v in latest_per_key(read_all(kafka, sink)).items()} == {b"a": b"2", b"b": b"1"}


def test_incompatible_run_is_refused(kafka, spark, topic_name):
    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 1)
    create_topic(kafka, source + "-other", 1)
    produce_values(kafka, source, [b"x"])
    run_once(app, source, sink)
    result = cli("run", "wordcount", "--input", source + "-other", "--output", sink, "--app-id", app, "--once")
    assert result.exit_code == 2
    assert "created with other settings" in result.stderr and "input topics" in result.stderr
    # without its required topics: a usage error naming the option, before anything is written
    missing = cli("run", "wordcount", "--app-id", app, "--once")
    assert (missing.exit_code, missing.stderr) == (2, "kstool: error: Missing option '--input'. "
                                                      "(see 'kstool run wordcount --help')\n")
    another = cli("run", "aggregate", "--input", source, "--output", sink, "--app-id", app, "--once")
    assert another.exit_code == 2
    assert f"app '{app}' runs topology wordcount, not aggregate;" in another.stderr, another.stderr


def test_a_run_missing_its_required_topics_is_a_usage_error_and_writes_nothing(tmp_path):
    """click 8.3+ took an explicit default=None for a value given: the run crashed on a None
    topic and left an empty app folder."""
    state_dir = tmp_path / "apps"
    for args in (("--output", "out"), ("--input", "in")):
        result = cli("run", "wordcount", "--app-id", "brandnew", "--once", "--state-dir", state_dir, *args)
        assert result.exit_code == 2 and "Missing option" in result.stderr, result.stderr
    assert not state_dir.exists()


def test_second_concurrent_run_exits_75(kafka, topic_name, tmp_path):
    from kstool.application.model import AppLock, AppPaths, default_state_dir

    app = topic_name + "-app"
    with AppLock(AppPaths(default_state_dir(), app), on_taken=None):
        proc = subprocess.run([*KSTOOL, "run", "wordcount", "--input", "x", "--output", "y",
                               "--app-id", app, "--once"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 75
    assert f"already running (pid {os.getpid()})" in proc.stderr
    assert "Spark ready" not in proc.stderr  # refused before Spark started


def test_bad_utf8_fail_skip_and_dlq(kafka, spark, topic_name):
    source = topic_name
    create_topic(kafka, source, 1)
    produce_values(kafka, source, [b"good words", b"bad \xff\xfe bytes", b"more good"])

    failed = cli("run", "wordcount", "--input", source, "--output", source + "-out1",
                 "--app-id", source + "-fail", "--once")
    assert failed.exit_code == 1
    assert f"not valid UTF-8 at {source}:0 offset 1" in failed.stderr
    errors = [line for line in failed.stderr.splitlines() if line.startswith("kstool: error:")]
    assert len(errors) == 1 and "Traceback" not in failed.stderr, failed.stderr

    run_once(source + "-skip", source, source + "-out2", "--on-error", "skip")
    assert output_counts(kafka, source + "-out2") == {"good": 2, "words": 1, "more": 1}

    dlq = source + "-dlq"
    summary = run_once(source + "-dlq-app", source, source + "-out3", "--on-error", f"dlq:{dlq}")
    assert summary["bad_records"] == 1
    assert output_counts(kafka, source + "-out3") == {"good": 2, "words": 1, "more": 1}
    [dead] = read_all(kafka, dlq)
    assert dead.value() == b"bad \xff\xfe bytes"
    assert dead.headers() == [  # Kafka Streams' form (KIP-1034), then the app that wrote it
        ("__streams.errors.exception", b"kstool.InvalidRecord"), ("__streams.errors.message", b"not valid UTF-8"),
        ("__streams.errors.stacktrace", b"kstool.InvalidRecord: not valid UTF-8"),
        ("__streams.errors.topic", source.encode()), ("__streams.errors.partition", b"0"),
        ("__streams.errors.offset", b"1"), ("kstool.dlq.app", (source + "-dlq-app").encode())]
    sent_back = cli("replay", "--dead-letters", "--from-topic", dlq, "--dry-run", "-o", "json")
    assert [(t["topic"], t["partition"], t["records"]) for t in json.loads(sent_back.stdout)["targets"]] == [
        (source, 0, 1)]


def test_sigkill_mid_stream_then_restart_loses_nothing(kafka, spark, topic_name):
    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 2)
    lines = [f"w{i % 37} w{i % 11} common" for i in range(3000)]
    produce_values(kafka, source, [line.encode() for line in lines[:1000]])
    proc = subprocess.Popen(
        [*KSTOOL, "run", "wordcount", "--input", source, "--output", sink, "--app-id", app,
         "--trigger", "200ms", "--max-records-per-batch", "300"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and sum(end_offsets_safe(kafka, sink).values()) == 0:
            time.sleep(0.5)
        assert sum(end_offsets_safe(kafka, sink).values()) > 0, "the app produced nothing"
        produce_values(kafka, source, [line.encode() for line in lines[1000:]])
        time.sleep(1.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the Python driver and its Spark JVM
        proc.wait(30)
    run_once(app, source, sink)
    assert output_counts(kafka, sink) == dict(oracle(lines))


def end_offsets_safe(kafka, topic) -> dict[int, int]:
    try:
        return end_offsets(kafka, topic)
    except KeyError:
        return {}


def test_topology_describe_matches_kafka_streams_shape():
    text = cli("topology", "describe", "wordcount", "--input", "lines", "--output", "counts")
    assert text.exit_code == 0
    lines = text.stdout.splitlines()
    assert lines[:3] == ["Topologies:", "   Sub-topology: 0",
                         "    Source: KSTREAM-SOURCE-0000000000 (topics: [lines])"]
    assert "    Sink: KSTREAM-SINK-0000000004 (topic: counts)" in lines
    doc = json.loads(cli("topology", "describe", "wordcount", "--app-id", "myapp", "-o", "json").stdout)
    assert doc["stores"][0]["changelog_topic"] == "myapp-counts-changelog"
    nodes = doc["sub_topologies"][0]["nodes"]
    assert [n["type"] for n in nodes] == ["source", "processor", "processor", "processor", "sink"]


def test_apps_list_and_describe(kafka, spark, topic_name):
    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 2)
    produce_values(kafka, source, [b"one two", b"two"])
    summary = run_once(app, source, sink)
    listed = {a["app_id"]: a for a in json.loads(cli("apps", "list", "-o", "json").stdout)}
    assert listed[app]["topology"] == "wordcount" and listed[app]["running_pid"] is None
    doc = json.loads(cli("apps", "describe", app, "-o", "json").stdout)
    assert doc["last_committed_batch"] == summary["last_batch"]
    assert {p["partition"]: p["offset"] for p in doc["processed_offsets"]} == end_offsets(kafka, source)
    assert doc["group"]["total_lag"] == 0
    assert doc["stores"][0]["changelog_topic"] == f"{app}-counts-changelog"
    missing = cli("apps", "describe", "no-such-app")
    assert missing.exit_code == 1 and "no kstool app 'no-such-app' in " in missing.stderr
    # a typo: every command says it alike, with the app meant
    for command in (("apps", "describe", app[:-1]), ("state", "all", "--app-id", app[:-1]),
                    ("reprocess", "--app-id", app[:-1], "--from-beginning", "--dry-run")):
        typo = cli(*command)
        assert typo.exit_code == 1 and typo.stderr.startswith(f"kstool: error: no kstool app {app[:-1]!r} in "), command
        assert f"; did you mean {app!r}?" in typo.stderr, (command, typo.stderr)
    shown = cli("apps", "describe", app).stdout
    assert shown.startswith(f"app {app}: wordcount, last committed batch {summary['last_batch']}, not running, "
                            "group lag 0")
    assert "history: batches 0..0 kept (--history-batches 1000: Spark keeps at least the last 1000" in shown

    from kstool.application.model import AppPaths, default_state_dir, load_manifest, save_manifest

    never_ran = app + "-new"  # a manifest, no batch committed yet
    manifest = load_manifest(AppPaths(default_state_dir(), app))
    save_manifest(AppPaths(default_state_dir(), never_ran), dataclasses.replace(manifest, app_id=never_ran))
    assert cli("apps", "describe", never_ran).stdout.startswith(f"app {never_ran}: wordcount, no committed batch yet, ")

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.delete_topics([source])[source].result(10)
    wait_until(lambda: json.loads(cli("apps", "describe", app, "-o", "json").stdout)["missing_input_topics"] == [source],
               "the deleted input topic to be named")
    assert f"input topic(s) {source} do not exist (deleted?): no lag" in cli("apps", "describe", app).stdout


def test_recreated_input_topic_is_detected_as_data_loss(kafka, spark, topic_name):
    from confluent_kafka.admin import AdminClient

    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 1)
    produce_values(kafka, source, [b"old words"] * 5)
    run_once(app, source, sink)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.delete_topics([source])[source].result(10)
    deadline = time.monotonic() + 30
    while source in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    create_topic(kafka, source, 1)
    produce_values(kafka, source, [b"new words", b"new"])

    failed = cli("run", "wordcount", "--input", source, "--output", sink, "--app-id", app, "--once")
    assert failed.exit_code == 1
    assert f"{source}:0 is at offset 5 but the log ends at 2" in failed.stderr
    run_once(app, source, sink, "--on-data-loss", "earliest")
    assert output_counts(kafka, sink) == {"old": 5, "words": 6, "new": 2}


def test_input_partitions_added_later_are_picked_up(on_apache_kafka, spark, topic_name):
    """On Apache Kafka: the embedded broker does not support CreatePartitions (UNSUPPORTED_FEATURE)."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    kafka = on_apache_kafka
    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 1)
    produce_values(kafka, source, [b"one two"])
    run_once(app, source, sink)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_partitions([NewPartitions(source, 2)])[source].result(10)
    produce_values(kafka, source, [b"two three"], partition=1)
    run_once(app, source, sink)
    assert output_counts(kafka, sink) == {"one": 1, "two": 2, "three": 1}


def test_the_source_combiner_counts_ascii_lines_as_the_oracle_and_leaves_the_rest():
    """WordCombiner takes the ASCII lines (their words counted, each word's newest timestamp and
    last offset) and leaves every other record as it came: non-ASCII lines and null values."""
    import random

    from kstool.tasks.combiners.words import WordCombiner

    rng = random.Random(3)
    vocabulary = ["Alpha", "beta", "GAMMA_2", "x9", "déjà", "vu", "İstanbul", "\u00ff", "a-b", "", "  ", "\t"]
    lines = [None if rng.random() < 0.05 else " ".join(rng.choice(vocabulary) for _ in range(rng.randrange(5)))
             .encode() for _ in range(2000)]
    lines[7] = b"\xff\xfe broken"
    combiner = WordCombiner()
    halves = [combiner.combine(source_rows([None] * 1000, lines[i:i + 1000], list(range(i, i + 1000))))
              for i in (0, 1000)]
    merged = {row["key"].decode(): row for row in combiner.merge([p for _, p in halves]).to_pylist()}
    kept = [row["offset"] for batch, _ in halves for row in batch.to_pylist()]
    ascii_lines = {i: line.decode() for i, line in enumerate(lines) if line is not None and line.isascii()}
    assert kept == [i for i in range(len(lines)) if i not in ascii_lines]
    assert {w: row["partial"]["count"] for w, row in merged.items()} == dict(oracle(ascii_lines.values()))
    for word, row in merged.items():
        having = [i for i, line in ascii_lines.items() if word in oracle([line])]
        assert row["offset"] == max(having) and row["timestamp"].timestamp() == max(having) + 1


def test_combined_and_record_by_record_runs_write_the_same(kafka, spark, topic_name):
    """The source's word combiner against every line on its own (KSTOOL_COMBINE=off): a
    normally batching producer, two partitions, several batches, non-ASCII lines and a line
    that is not UTF-8 (skipped, counted)."""
    import random

    from tests.helpers import produce_batched

    create_topic(kafka, topic_name, 2)
    rng = random.Random(5)
    words = ["the", "The", "cat", "déjà", "vu", "Straße", "x_1", "42"]
    lines = [" ".join(rng.choice(words) for _ in range(6)).encode() for _ in range(2500)] + [b"\xff bad"]
    produce_batched(kafka, topic_name, [(None, line) for line in lines])
    outputs = {}
    for mode in ("on", "off"):
        out = f"{topic_name}-{mode}"
        result = cli("run", "wordcount", "--input", topic_name, "--output", out, "--app-id", out, "--once",
                     "--max-records-per-batch", "600", "--on-error", "skip", "--report", "json",
                     env={"KSTOOL_COMBINE": mode})
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout)
        counts = {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, out)).items()}
        outputs[mode] = (counts, report["bad_records"], report["batches"])
    assert outputs["on"][0] == outputs["off"][0] == dict(oracle(line.decode() for line in lines[:-1]))
    assert outputs["on"][1] == outputs["off"][1] == 1 and outputs["on"][2] >= 4
