"""The `kstool` entry point: global options, the command tree, and the one place errors
become messages and exit codes."""

from __future__ import annotations

import logging
import os
import sys
import traceback

import click

from kstool import __version__
from kstool.commands.context import finish_tree
from kstool.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, Interrupted, KstoolError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="kstool")
def cli():
    """kstool: a toolbox for Kafka stream jobs.

    Run Kafka-Streams-style topologies on Spark, reset applications, inspect changelogs,
    query state stores, replay inputs, and the everyday Kafka one-liners. The connection
    options (-b, --command-config, -X, --timeout, --debug) go before or after the command.
    """
    # libraries (py4j, librdkafka) must not print tracebacks past kstool's one line
    logging.getLogger().addHandler(logging.NullHandler())


def _register() -> None:
    from kstool.commands import (
        apps,
        broker,
        changelog,
        completion,
        config,
        consume,
        engine,
        groups,
        produce,
        replay,
        reset,
        run,
        state,
        topics,
        topology,
    )

    for group in (broker.broker, topics.topics, groups.groups, produce.produce, consume.consume,
                  run.run, topology.topology, apps.apps, reset.reset, changelog.changelog,
                  config.config, replay.replay, run.reprocess, state.state, engine.engine,
                  completion.completion):
        cli.add_command(group)
    finish_tree(cli)


_register()


def _fail(message: str, code: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    sys.stderr.write(f"kstool: error: {message}\n")
    return code


def run(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    try:
        result = cli.main(args=argv, prog_name="kstool", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        return _fail(exc.format_message() + hint, EXIT_USAGE, debug)
    except click.ClickException as exc:
        return _fail(exc.format_message(), exc.exit_code, debug)
    except Interrupted as exc:
        sys.stderr.write(f"kstool: {exc}\n")
        return exc.exit_code
    except KstoolError as exc:
        return _fail(str(exc), exc.exit_code, debug)
    except (click.Abort, KeyboardInterrupt):
        sys.stderr.write("kstool: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader (e.g. `| head`) went away: that is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # a bug: still one line, the traceback only with --debug
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        return _fail(f"unexpected {type(exc).__name__}: {first_line} (run with --debug for details)",
                     EXIT_FAILURE, debug)


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
