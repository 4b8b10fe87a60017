"""The foundation: CLI conventions, error handling, the embedded broker, topics list."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

from tests.conftest import cli, cli_subprocess


def test_help_does_not_import_spark_or_the_column_libraries():
    """`kstool --help` names every topology but loads none of what runs them (numpy and pyarrow
    cost ~100 ms of a start)."""
    code = ("import sys; from kstool.commands.main import run; rc = run(['--help']); "
            "print(rc, *sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'numpy', 'pyarrow', 'pandas'}), "
            "file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.split() == ["0"], out.stderr


def test_a_command_loads_only_its_own_module():
    """`kstool topics --help` imports the topics command (and the completers it uses), not the
    other commands' modules: each costs a one-liner's start time."""
    from kstool.commands.main import COMMANDS

    others = sorted({f"kstool.commands.{module}" for module, _ in COMMANDS.values()} - {
        "kstool.commands.topics", "kstool.commands.completion"})
    code = ("import sys; from kstool.commands.main import run; rc = run(['topics', '--help']); "
            f"print(rc, *sorted(set(sys.modules) & set({others!r})), file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.split() == ["0"], out.stderr


def test_help_lists_the_commands_as_click_would_with_every_command_loaded():
    """The root --help reads the generated summaries (commands/summaries.py); they say what the
    commands' own help says."""
    import click

    from kstool.commands.main import cli

    def listing(format_commands) -> str:
        ctx = click.Context(cli, info_name="kstool")
        formatter = ctx.make_formatter()
        format_commands(ctx, formatter)
        return formatter.getvalue()

    lazy = listing(cli.format_commands)
    cli.commands  # noqa: B018  # every command loaded
    assert lazy == listing(lambda ctx, formatter: click.Group.format_commands(cli, ctx, formatter))
    assert lazy.count("\n  ") == 16


def test_help_subprocess_lists_command_groups():
    result = cli_subprocess("--help")
    assert result.exit_code == 0
    for group in ("broker", "topics", "groups", "produce", "consume"):
        assert group in result.stdout


def test_unreachable_broker_fails_naming_the_address(fresh_home):
    result = cli_subprocess("-b", "127.0.0.1:1", "--timeout", "2", "topics", "list", timeout=60)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kstool: error:") and "127.0.0.1:1" in lines[0]
    assert "Traceback" not in result.stderr


def test_usage_error_is_one_line_exit_2():
    result = cli("topics", "create")
    assert result.exit_code == 2
    assert result.stderr.startswith("kstool: error:") and result.stderr.count("\n") == 1


def test_unknown_command_is_usage_error():
    result = cli("frobnicate")
    assert result.exit_code == 2 and "frobnicate" in result.stderr


def test_version():
    result = cli("--version")
    assert result.exit_code == 0 and "kstool" in result.stdout


def test_topics_list_json_contains_created_topic(kafka, topic_name):
    assert cli("topics", "create", topic_name, "-p", "3").exit_code == 0
    result = cli("topics", "list", "-o", "json")
    assert result.exit_code == 0, result.stderr
    topics = {t["topic"]: t for t in json.loads(result.stdout)}
    assert topics[topic_name]["partitions"] == 3


def test_topics_list_formats(kafka, topic_name):
    assert cli("topics", "create", topic_name).exit_code == 0
    jsonl = cli("topics", "list", "-o", "jsonl").stdout.splitlines()
    assert any(json.loads(line)["topic"] == topic_name for line in jsonl)
    csv_lines = cli("topics", "list", "-o", "csv").stdout.splitlines()
    assert csv_lines[0] == "topic,partitions,replication_factor"
    assert any(line.startswith(topic_name + ",1,") for line in csv_lines)
    table = cli("topics", "list").stdout
    assert "TOPIC" in table and topic_name in table


def test_broker_lifecycle_in_its_own_home(fresh_home):
    first = cli_subprocess("broker", "start", "--port", "0")
    assert first.exit_code == 0, first.stderr
    address = first.stdout.strip()
    try:
        second = cli_subprocess("broker", "start", "--port", "0")
        assert second.exit_code == 0 and second.stdout.strip() == address
        assert "already running" in second.stderr
        status = json.loads(cli_subprocess("broker", "status", "-o", "json").stdout)
        assert status["running"] is True and status["bootstrap_servers"] == address
        # commands in this home talk to this broker without -b
        assert cli_subprocess("topics", "create", "only-here").exit_code == 0
        listed = json.loads(cli_subprocess("topics", "list", "-o", "json").stdout)
        assert [t["topic"] for t in listed] == ["only-here"]
    finally:
        stopped = cli_subprocess("broker", "stop")
    assert stopped.exit_code == 0
    status = json.loads(cli_subprocess("broker", "status", "-o", "json").stdout)
    assert status["running"] is False and status["pid"] is None


def test_broker_port_taken_is_a_clear_error(fresh_home):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = cli_subprocess("broker", "start", "--port", str(port))
    assert result.exit_code == 1
    assert f"port {port}" in result.stderr and "already in use" in result.stderr


def test_home_files_are_private(fresh_home):
    result = cli_subprocess("broker", "start", "--port", "0")
    try:
        assert result.exit_code == 0
        broker_dir = fresh_home / "broker"
        assert stat.S_IMODE(os.stat(broker_dir).st_mode) == 0o700
        for name in ("profile.json", "broker.log"):
            assert stat.S_IMODE(os.stat(broker_dir / name).st_mode) == 0o600, name
    finally:
        cli_subprocess("broker", "stop")
