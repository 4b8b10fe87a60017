"""The `kstool` entry point: global options, the command tree, and the one place errors
become messages and exit codes."""

from __future__ import annotations

import logging
import os
import sys
import traceback

import click

from kstool import __version__
from kstool.errors import EXIT_FAILURE, EXIT_USAGE, KstoolError

from kstool.commands.context import Globals

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.option("-b", "--bootstrap-servers", "bootstrap", metavar="HOST:PORT[,...]",
              help="Kafka bootstrap servers. [env KSTOOL_BOOTSTRAP_SERVERS; else the running "
                   "embedded broker; else localhost:9092]")
@click.option("--command-config", type=click.Path(dir_okay=False), metavar="FILE",
              help="Client properties file (security settings etc.), as Kafka's tools take.")
@click.option("-X", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Client property override (repeatable), like kcat -X.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=10.0,
              show_default=True, help="Seconds to wait for the broker before giving up.")
@click.option("--debug", is_flag=True, help="Show tracebacks and client logs.")
@click.version_option(__version__, "--version", prog_name="kstool")
@click.pass_context
def cli(ctx: click.Context, bootstrap, command_config, overrides, timeout_s, debug):
    """kstool: a toolbox for Kafka stream jobs.

    Run Kafka-Streams-style topologies on Spark, reset applications, inspect changelogs,
    query state stores, replay inputs, and the everyday Kafka one-liners.
    """
    ctx.obj = Globals(bootstrap, command_config, tuple(overrides), timeout_s, debug)
    if debug:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
    else:  # libraries (py4j, librdkafka) must not print tracebacks past kstool's one line
        logging.getLogger().addHandler(logging.NullHandler())


def _register() -> None:
    from kstool.commands import (apps, broker, changelog, completion, config, consume, groups,
                                 produce, replay, reset, run, state, topics, topology)

    for group in (broker.broker, topics.topics, groups.groups, produce.produce, consume.consume,
                  run.run, topology.topology, apps.apps, reset.reset, changelog.changelog,
                  config.config, replay.replay, run.reprocess, state.state, completion.completion):
        cli.add_command(group)


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
    except KstoolError as exc:
        return _fail(str(exc), exc.exit_code, debug)
    except (click.Abort, KeyboardInterrupt):
        sys.stderr.write("kstool: interrupted\n")
        return 130
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
