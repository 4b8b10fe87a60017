"""The command tree (kstool.commands.main): help without Spark, one module per command loaded,
usage errors, the version, an unreachable broker."""

from __future__ import annotations

import os
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


def test_asking_the_engine_its_status_does_not_import_spark_or_the_column_libraries(tmp_path):
    """The engine's front door (kstool.engine) imports a name's module on first use: `engine
    status` needs the client's, not the query's."""
    code = ("import sys; from kstool.commands.main import run; rc = run(['engine', 'status']); "
            "print(rc, *sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'numpy', 'pyarrow', 'pandas'}), "
            "file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "KSTOOL_HOME": str(tmp_path)})
    assert out.stderr.split()[-1:] == ["0"], out.stderr
    assert out.stdout.split() == ["RUNNING", "no"]


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


def test_a_command_group_alone_prints_its_help_not_an_error_line_holding_it():
    for args in ((), ("apps",), ("state",)):
        result = cli(*args)
        assert result.exit_code == 2, args
        assert result.stderr.startswith(f"Usage: kstool {' '.join(args)}".rstrip() + " [OPTIONS] COMMAND"), result.stderr
        assert "error" not in result.stderr.splitlines()[0] and result.stdout == ""
