"""Click decorators and parameter types shared by several commands."""

from __future__ import annotations

import click

from kstool.output import FORMATS


def output_option(default: str = "table", formats: tuple[str, ...] = FORMATS):
    return click.option(
        "-o", "--output", "output", type=click.Choice(formats), default=default, show_default=True,
        help="Output format; json is one stable document, jsonl one object per line.")


def yes_option(what: str):
    return click.option("--yes", "-y", is_flag=True, help=f"Do not ask before {what}.")
