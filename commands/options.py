"""Click decorators and parameter types shared by several commands."""

from __future__ import annotations

import sys

import click

from kstool.application.model import resolve_state_dir
from kstool.errors import KstoolError, UsageError
from kstool.output import FORMATS
from kstool.timeutil import parse_time


def output_option():
    return click.option(
        "-o", "--output", "output", type=click.Choice(FORMATS), default="table", show_default=True,
        help="Output format; json is one stable document, jsonl one object per line.")


def state_dir_option(help_text: str = "Where kstool apps live [default: $KSTOOL_HOME/apps]."):
    """--state-dir, handed to the command as a resolved Path."""
    return click.option("--state-dir", type=click.Path(file_okay=False), help=help_text,
                        callback=lambda ctx, param, value: resolve_state_dir(value))


def yes_option(what: str):
    return click.option("--yes", "-y", is_flag=True, help=f"Do not ask before {what}.")


def confirm_or_refuse(question: str, yes: bool) -> None:
    """A destructive step goes ahead with --yes, or after a yes on a terminal; off a terminal
    (cron, pipes) without --yes it is refused before anything is done."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError("not on a terminal: add --yes to confirm (or --dry-run to see the plan)")
    if not click.confirm(question, err=True):
        raise KstoolError("not confirmed: nothing was changed")


class TimeType(click.ParamType):
    """A time as every command takes it: ISO-8601, epoch ms (or @ms), or a duration ago."""

    name = "time"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return parse_time(value)
        except UsageError as exc:
            self.fail(str(exc), param, ctx)


TIME = TimeType()
