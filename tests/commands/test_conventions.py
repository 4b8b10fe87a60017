"""Conventions every command keeps: one-line errors and exit codes, --yes off a terminal, options
before or after the command, -o formats and examples, times, the spellings of Kafka's tools and kcat."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys

import click
import pytest
from confluent_kafka import Consumer, TopicPartition

from kstool.commands.main import cli as cli_tree
from kstool.output import FORMATS
from tests.conftest import cli, cli_subprocess
from tests.helpers import KSTOOL, T0, create_topic, jsonl_rows, nonempty_lines, produce_batched, produce_keyed, read_all


def _commands(command: click.Command, path: tuple = ()):
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), command




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
    assert nonempty_lines(result.stdout) == ["late"]


def test_every_command_that_shows_data_takes_every_output_format_and_ends_help_with_examples():
    silent = {"broker start", "broker stop", "engine start", "engine stop", "engine prepare", "completion", "produce", "topics create",
              "topics delete"}  # they write or act, not show; so does each `run NAME`
    for path, command in _commands(cli_tree):
        if path not in silent and not path.startswith("run "):
            output = next(p for p in command.params if "-o" in p.opts)
            assert set(FORMATS) <= set(output.type.choices), path
    groups = [name for name, c in cli_tree.commands.items() if isinstance(c, click.Group)]
    for path in [p for p, _ in _commands(cli_tree)] + groups + [""]:
        help_text = cli(*path.split(), "--help").stdout
        assert re.search(r"\n  Examples:\n(    \S.*\n){1,3}$", help_text), path


def test_errors_are_one_line(kafka, topic_name):
    unknown = cli("consume", "no-such-topic-" + topic_name, "-e")
    assert unknown.exit_code == 1 and "does not exist" in unknown.stderr
    assert unknown.stderr.count("\n") == 1
    create_topic(kafka, topic_name, 1)
    bad = cli("produce", topic_name, "--format", "jsonl", input='{"value": "ok"}\n{oops\n{"value": "never"}\n')
    assert bad.exit_code == 1 and "line 2" in bad.stderr and "1 record(s) before it" in bad.stderr
    written = jsonl_rows(cli("consume", topic_name, "-e", "-o", "jsonl").stdout)
    assert [e["value"] for e in written] == ["ok"]
    bad_time = cli("consume", topic_name, "--from-time", "yesterday-ish", "-e")
    assert bad_time.exit_code == 2 and "invalid time" in bad_time.stderr
    assert "Traceback" not in bad.stderr + bad_time.stderr + unknown.stderr


def test_kafka_tool_spellings_and_kcat_habits_work_or_say_what_to_type(kafka, topic_name):
    """#41: `--topic`/`--group` as kafka-topics.sh and kafka-consumer-groups.sh spell them; kcat's
    `-o -3` (an offset) names --from; a group's state is the same in list and describe."""
    created = cli("topics", "create", topic_name, "-p", "1")
    assert created.exit_code == 0  # the factor is the broker's default (-r not given)
    assert re.fullmatch(rf"created topic {topic_name} \(1 partition, replication factor \d+\)\n", created.stderr)
    cli("produce", topic_name, input="a\nb\nc\n")
    by_flag = cli("topics", "describe", "--topic", topic_name, "-o", "json")
    assert by_flag.exit_code == 0 and json.loads(by_flag.stdout)["total_records"] == 3
    assert by_flag.stdout == cli("topics", "describe", topic_name, "-o", "json").stdout
    both = cli("topics", "describe", topic_name, "--topic", "other")
    assert both.exit_code == 2 and "give the topic once" in both.stderr
    neither = cli("topics", "describe")
    assert neither.exit_code == 2 and "missing TOPIC (or --topic TOPIC)" in neither.stderr

    kcat = cli("consume", topic_name, "-o", "-3")
    assert kcat.exit_code == 2 and "give the start as --from -3" in kcat.stderr
    assert cli("consume", topic_name, "-o", "yaml").stderr.count("--from") == 0  # no offset, no hint

    group = topic_name + "-g"
    consumer = Consumer({**kafka.consumer_conf(), "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
    consumer.close()
    described = json.loads(cli("groups", "describe", "--group", group, "-o", "json").stdout)
    listed = {g["group"]: g["state"] for g in json.loads(cli("groups", "list", "-o", "json").stdout)}
    assert described["total_lag"] == 2 and listed[group] == described["state"] != "UNKNOWN"


def test_a_refused_connection_fails_at_once(fresh_home):
    # --timeout 600: were it waited out, cli_subprocess's own 60 s limit would fail the test
    result = cli_subprocess("-b", "127.0.0.1:1", "--timeout", "600", "topics", "list", timeout=60)
    assert result.exit_code == 1 and "connection refused" in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_host_that_does_not_resolve_fails_at_once_and_a_port_out_of_range_is_a_usage_error(fresh_home):
    # --timeout 600: were it waited out, cli_subprocess's own 60 s limit would fail the test
    unknown = cli_subprocess("-b", "nosuchhost.invalid:9092", "--timeout", "600", "topics", "list", timeout=60)
    assert unknown.exit_code == 1, unknown.stderr
    assert unknown.stderr == ("kstool: error: cannot reach Kafka at nosuchhost.invalid:9092: no such host: "
                              "nosuchhost.invalid (the name does not resolve)\n")
    out_of_range = cli("-b", "127.0.0.1:70000", "topics", "list")
    assert out_of_range.exit_code == 2
    assert out_of_range.stderr == ("kstool: error: invalid bootstrap server '127.0.0.1:70000' (from "
                                   "--bootstrap-servers): expected HOST:PORT with a port from 1 to 65535\n")
