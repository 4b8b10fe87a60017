"""One-liners an operator can trust (issue: never miss a record, refuse bad names, behave like
kcat). Data for the reading tests comes from a default-batching confluent-kafka producer, as
any application writes it, never only from kstool."""

from __future__ import annotations

import io
import json
import os
import re
import select
import signal
import subprocess
import sys

import click
import pytest

from kstool.commands.main import cli as cli_tree
from kstool.config import parse_properties
from kstool.kafka.partitioner import partition_for
from kstool.output import FORMATS, Column, Listing, emit
from tests.conftest import KSTOOL, cli
from tests.helpers import T0, create_topic, produce_batched, produce_keyed, read_all

BAD_NAMES = ["", "bad topic", "a/b", "..", "a" * 250, "ünïcode"]


def _lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line]


@pytest.fixture(scope="module")
def batched(kafka):
    """20,000 records in two partitions, many per batch; keys k0..k99, values v<i>."""
    topic = f"batched-{os.getpid()}"
    create_topic(kafka, topic, 2)
    records = [(f"k{i % 100}".encode(), f"v{i}".encode(), i % 2) for i in range(20_000)]
    produce_batched(kafka, topic, records)
    assert len(read_all(kafka, topic)) == 20_000  # the independent reader sees them all
    return topic


# -- 1. topic names ------------------------------------------------------------------------

@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_topic_names_are_refused_before_any_request(kafka, name):
    created = cli("topics", "create", name)
    assert created.exit_code == 2, created.stderr
    assert "invalid topic name" in created.stderr and len(created.stderr.splitlines()) == 1
    for args in (["topics", "delete", name, "--yes"], ["consume", name, "-e"], ["topics", "describe", name]):
        result = cli(*args, input="x\n")
        assert result.exit_code == 2, (args, result.stderr)
    assert name not in {t["topic"] for t in json.loads(cli("topics", "list", "-o", "json").stdout)}


def test_deleting_the_empty_topic_name_keeps_every_other_topics_records(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    produce_batched(kafka, topic_name, [(None, b"kept")] * 10)
    assert cli("topics", "delete", "", "--yes").exit_code == 2
    assert len(read_all(kafka, topic_name)) == 10


# -- 2. the true end of a partition --------------------------------------------------------

def test_consume_to_the_end_reads_every_record_of_a_batching_producer(kafka, batched):
    result = cli("consume", batched, "-e")
    assert result.exit_code == 0, result.stderr
    assert sorted(_lines(result.stdout)) == sorted(f"v{i}" for i in range(20_000))
    last = cli("consume", batched, "--from", "-3", "-e", "-f", "%p:%o %s\\n")
    assert sorted(_lines(last.stdout)) == ["0:9997 v19994", "0:9998 v19996", "0:9999 v19998",
                                           "1:9997 v19995", "1:9998 v19997", "1:9999 v19999"]


def test_topics_describe_and_time_bounds_count_every_batched_record(kafka, batched):
    doc = json.loads(cli("topics", "describe", batched, "-o", "json").stdout)
    assert doc["total_records"] == 20_000
    assert [p["high_offset"] for p in doc["partitions"]] == [10_000, 10_000]
    bounded = cli("consume", batched, "--to-time", "now", "-o", "jsonl")
    assert bounded.exit_code == 0 and len(_lines(bounded.stdout)) == 20_000


def test_changelog_and_state_reads_see_the_tail_of_a_batch(kafka, topic_name):
    changelog = f"{topic_name}-store-changelog"
    create_topic(kafka, changelog, 1, {"cleanup.policy": "compact"})
    produce_batched(kafka, changelog, [(f"key{i}".encode(), (i).to_bytes(8, "big")) for i in range(500)])
    last = cli("state", "get", "--changelog-topic", changelog, "--key-format", "string",
               "--value-format", "long", "key499", "-o", "json")
    assert last.exit_code == 0, last.stderr
    assert json.loads(last.stdout)[0]["value"] == 499
    described = json.loads(cli("changelog", "describe", changelog, "--key-format", "string",
                               "--value-format", "long", "-o", "json").stdout)
    assert described["total"]["records"] == 500 and described["total"]["distinct_keys"] == 500


def test_replay_and_reset_plans_cover_batched_records(kafka, batched, topic_name):
    create_topic(kafka, topic_name, 2)
    copied = cli("replay", "--from-topic", batched, "--to-topic", topic_name, "-o", "json")
    assert copied.exit_code == 0, copied.stderr
    assert json.loads(copied.stdout)["records"] == 20_000
    assert len(read_all(kafka, topic_name)) == 20_000
    plan = json.loads(cli("reset", "--app-id", topic_name + "-app", "--input-topics", batched,
                          "--to-latest", "--dry-run", "-o", "json").stdout)
    assert sorted(o["target"] for o in plan["offsets"]) == [10_000, 10_000]


def test_run_once_counts_every_record_of_a_batching_producer(kafka, spark, topic_name):
    source, sink = topic_name, topic_name + "-out"
    create_topic(kafka, source, 2)
    produce_batched(kafka, source, [(None, f"w{i % 50} shared".encode(), i % 2) for i in range(3000)])
    result = cli("run", "wordcount", "--input", source, "--output", sink, "--app-id", topic_name,
                 "--once", "--report", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["input_records"] == 3000
    counts = {}
    for msg in read_all(kafka, sink):
        counts[msg.key().decode()] = int.from_bytes(msg.value(), "big")
    assert counts["shared"] == 3000 and counts["w0"] == 60


# -- 3. interrupts and confirmations -------------------------------------------------------

def test_interrupted_dump_exits_130_and_says_how_far_it_got(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    produce_batched(kafka, topic_name, [(None, b"x" * 100)] * 50_000)
    proc = subprocess.Popen([*KSTOOL, "consume", topic_name, "-e"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    # it is writing; unread, the pipe fills and it blocks (select does not consume the output)
    assert select.select([proc.stdout], [], [], 60)[0]
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    printed = out.count(b"\n")
    assert out.endswith(b"\n") and set(out.splitlines()) == {b"x" * 100}  # whole records only
    assert proc.returncode == 130
    assert err.decode().strip() == f"kstool: interrupted after {printed} record(s)"
    assert printed < 50_000


def test_destructive_commands_refuse_without_yes_off_a_terminal(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    produce_keyed(kafka, topic_name, [("k", "v", 1)])
    group = topic_name + "-app"
    assert cli("reset", "--app-id", group, "--input-topics", topic_name, "--to-latest", "--yes").exit_code == 0
    refused = cli("reset", "--app-id", group, "--input-topics", topic_name, "--to-earliest")
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    committed = json.loads(cli("groups", "describe", group, "-o", "json").stdout)
    assert [p["committed"] for p in committed["partitions"]] == [1]  # still at latest
    deleted = cli("topics", "delete", topic_name)
    assert deleted.exit_code == 2 and "--yes" in deleted.stderr
    assert len(read_all(kafka, topic_name)) == 1


# -- 4. produce in batches, exact counts ---------------------------------------------------

def test_produce_batches_and_reports_exact_per_partition_counts(kafka, topic_name):
    create_topic(kafka, topic_name, 3)
    lines = "".join(f"key{i % 37}:value{i}\n" for i in range(20_000))
    result = cli("produce", topic_name, "-K", ":", input=lines)
    assert result.exit_code == 0, result.stderr
    assert "wrote 20000 record(s)" in result.stderr
    messages = read_all(kafka, topic_name)
    assert len(messages) == 20_000
    for msg in messages:  # the Java client's partitioner, as Kafka Streams apps expect
        assert msg.partition() == partition_for(msg.key(), 3)
    assert sorted(m.value().decode() for m in messages) == sorted(f"value{i}" for i in range(20_000))


def test_produce_line_without_key_delimiter_gets_a_null_key_as_kcat(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    assert cli("produce", topic_name, "-K", ":", input="a:1\nno delimiter\nb:2\n").exit_code == 0
    got = [(m.key(), m.value()) for m in read_all(kafka, topic_name)]
    assert got == [(b"a", b"1"), (None, b"no delimiter"), (b"b", b"2")]


def test_oversized_record_is_named_with_the_limit_and_the_rest_is_counted(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    result = cli("produce", topic_name, input="small\n" + "x" * 1_048_576 + "\nafter\n")
    assert result.exit_code == 1
    assert "line 2" in result.stderr and "1048576 bytes" in result.stderr
    assert "message.max.bytes" in result.stderr and "2 record(s) written, 1 not delivered" in result.stderr
    assert [m.value() for m in read_all(kafka, topic_name)] == [b"small", b"after"]


# -- 5. Java .properties -------------------------------------------------------------------

def test_command_config_parses_java_properties_completely():
    # java.util.Properties#load: separators '=', ':' or blanks; '\' continues a line
    text = ("# comment\n! also a comment\n"
            "security.protocol = SASL_SSL\n"
            "sasl.mechanism:PLAIN\n"
            "client.id kstool\\ ops\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
            "    username=\"alice\" \\\n"
            "    password=\"p=w:d\";\n"
            "ssl.ca.location=C:\\\\certs\\\\ca.pem\n"
            "x.unicode=caf\\u00e9\n"
            "key\\=with\\:separators = v=1\n"
            "empty.value\n")
    props = parse_properties(text, "client.properties")
    assert props == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "client.id": "kstool ops",
                     "sasl.username": "alice", "sasl.password": "p=w:d",
                     "ssl.ca.location": "C:\\certs\\ca.pem", "x.unicode": "café",
                     "key=with:separators": "v=1", "empty.value": ""}


def test_config_show_reads_a_multiline_jaas_file_and_masks_the_password(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("sasl.jaas.config=x.PlainLoginModule required \\\n  username=\"bob\" \\\n"
                     "  password=\"hunter2\";\nsecurity.protocol SASL_PLAINTEXT\n")
    result = cli("config", "show", "--command-config", str(props), "-o", "json")
    assert result.exit_code == 0, result.stderr
    common = json.loads(result.stdout)["common"]
    assert common["sasl.username"] == "bob" and common["security.protocol"] == "SASL_PLAINTEXT"
    assert "hunter2" not in result.stdout


# -- 6, 7. global options anywhere; unreachable and unknown ---------------------------------

def test_connection_options_work_after_the_command(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    listed = cli("topics", "list", "-b", kafka.bootstrap, "--timeout", "5", "-o", "json")
    assert topic_name in {t["topic"] for t in json.loads(listed.stdout)}
    unreachable = cli("topics", "list", "-b", "127.0.0.1:1", "--timeout", "1")
    assert unreachable.exit_code == 1 and "cannot reach Kafka at 127.0.0.1:1" in unreachable.stderr


def test_unreachable_broker_and_unknown_group_are_errors(kafka):
    listed = cli("-b", "127.0.0.1:1", "--timeout", "1", "groups", "list")
    assert listed.exit_code == 1 and "cannot reach Kafka" in listed.stderr and listed.stdout == ""
    missing = cli("groups", "describe", "no-such-group-anywhere")
    assert missing.exit_code == 1 and "does not exist" in missing.stderr


def test_completion_uses_the_bootstrap_given_on_the_command_line(kafka, topic_name, tmp_path):
    create_topic(kafka, topic_name, 1)
    words = f"kstool topics describe -b {kafka.bootstrap} {topic_name[:12]}"
    env = {**os.environ, "KSTOOL_HOME": str(tmp_path), "KSTOOL_BOOTSTRAP_SERVERS": "127.0.0.1:1",
           "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1), "_KSTOOL_COMPLETE": "bash_complete"}
    out = subprocess.run([sys.executable, "-m", "kstool.commands.main"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert f"plain,{topic_name}" in out.stdout.splitlines()


# -- 8. replay from a dump ---------------------------------------------------------------

def test_file_replay_checks_partitions_first_and_records_its_provenance(kafka, topic_name, tmp_path):
    create_topic(kafka, topic_name, 2)
    dump = tmp_path / "dump.jsonl"
    good = [{"partition": i % 2, "key": f"k{i}", "value": f"v{i}", "timestamp": T0 + i, "headers": []}
            for i in range(3)]
    dump.write_text("".join(json.dumps(e) + "\n" for e in [*good, {**good[0], "partition": 5}]))
    refused = cli("replay", "--from-file", str(dump), "--to-topic", topic_name)
    assert refused.exit_code == 2 and "dump.jsonl:4" in refused.stderr and "nothing was written" in refused.stderr
    assert read_all(kafka, topic_name) == []

    dump.write_text("\n" + "".join(json.dumps(e) + "\n" for e in good))  # records on lines 2..4
    result = cli("replay", "--from-file", str(dump), "--to-topic", topic_name, "-o", "json")
    assert result.exit_code == 0, result.stderr
    rows = {r["partition"]: r for r in json.loads(result.stdout)["partitions"]}
    assert (rows[0]["first_line"], rows[0]["last_line"], rows[1]["first_line"]) == (2, 4, 3)
    for msg in read_all(kafka, topic_name):
        headers = dict(msg.headers())
        assert headers["kstool.replay.file"] == str(dump).encode()
        line = int(headers["kstool.replay.line"])
        assert msg.value() == f"v{line - 2}".encode() and msg.timestamp()[1] == T0 + line - 2


# -- 9. one rule for bad input -------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["consume", "{t}", "--from-time", "99999999999999999999", "-e"],
    ["consume", "{t}", "--from-time", "", "-e"],
    ["consume", "{t}", "--from-time", "2026-01-02", "--to-time", "2026-01-01"],
    ["consume", "{t}", "--from-time", "-1h", "--from", "end", "-e"],
    ["consume", "{t}", "-p", "3", "-e"],
    ["produce", "{t}", "-p", "3"],
    ["produce", "{t}", "--key", "k", "--key-format", "long"],
    ["replay", "--from-topic", "{t}", "--to-topic", "{t}-x", "--from-time", "-1h", "--to-time", "-2h"],
])
def test_bad_input_is_a_usage_error_with_one_line(kafka, topic_name, args):
    create_topic(kafka, topic_name, 1)
    create_topic(kafka, topic_name + "-x", 1)
    result = cli(*[a.format(t=topic_name) for a in args], input="x\n")
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith("kstool: error: ") and len(result.stderr.splitlines()) == 1
    assert "unexpected" not in result.stderr
    assert read_all(kafka, topic_name) == [] and read_all(kafka, topic_name + "-x") == []


def test_at_epoch_ms_is_a_time_everywhere(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    produce_keyed(kafka, topic_name, [("a", "early", 1), ("b", "late", 5)])
    result = cli("consume", topic_name, "--from-time", f"@{T0 + 2000}", "-e")
    assert result.exit_code == 0, result.stderr
    assert _lines(result.stdout) == ["late"]


# -- 10. output formats --------------------------------------------------------------------

def _commands(command: click.Command, path: tuple = ()):
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), command


def test_every_command_that_shows_data_takes_every_output_format_and_ends_help_with_examples():
    silent = {"broker start", "broker stop", "engine start", "engine stop", "completion", "produce", "topics create",
              "topics delete"}  # they write or act, not show; so does each `run NAME`
    for path, command in _commands(cli_tree):
        if path not in silent and not path.startswith("run "):
            output = next(p for p in command.params if "-o" in p.opts)
            assert set(FORMATS) <= set(output.type.choices), path
    groups = [name for name, c in cli_tree.commands.items() if isinstance(c, click.Group)]
    for path in [p for p, _ in _commands(cli_tree)] + groups + [""]:
        help_text = cli(*path.split(), "--help").stdout
        assert re.search(r"\n  Examples:\n(    \S.*\n){1,3}$", help_text), path


def test_csv_writes_booleans_and_nulls_as_json_does(kafka):
    out = io.StringIO()
    emit(Listing([{"ok": True, "gone": False, "none": None, "n": 1, "list": [1]}],
                 [Column(k) for k in ("ok", "gone", "none", "n", "list")]), "csv", out)
    assert out.getvalue() == 'ok,gone,none,n,list\ntrue,false,null,1,[1]\n'
    if kafka.embedded:
        status = _lines(cli("broker", "status", "-o", "csv").stdout)
        assert status[0].startswith("running,") and status[1].startswith("true,")


def test_raw_value_format_writes_the_bytes_as_they_are(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    payload = bytes(range(256))
    produce_batched(kafka, topic_name, [(None, payload)])
    result = cli("consume", topic_name, "-e", "--value-format", "raw", "-f", "%s")
    assert result.stdout_bytes == payload
    as_json = json.loads(cli("consume", topic_name, "-e", "--value-format", "raw", "-o", "jsonl").stdout)
    assert as_json["value"]["base64"]
