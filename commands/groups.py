"""kstool groups list|describe: consumer groups, members and lag."""

from __future__ import annotations

import click

from kstool.base.timeutil import format_duration
from kstool.commands.completion import complete_groups
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import named_argument, output_option
from kstool.kafka import groups as ops
from kstool.output import Column, Listing, emit


@click.group()
def groups():
    """Consumer groups (= application ids), members, committed offsets and lag."""


@groups.command("list")
@output_option()
@pass_globals
def list_(g: Globals, output: str):
    """List consumer groups with their state."""
    emit(Listing(ops.list_groups(g.clients()), [Column("group"), Column("state"), Column("simple")]),
         output)


@groups.command()
@named_argument("group", "The same as GROUP (kafka-consumer-groups.sh's spelling).", shell_complete=complete_groups)
@click.option("--time-lag", is_flag=True,
              help="Also the lag in time: how long the oldest unprocessed record of each partition has "
                   "waited (reads one record per lagging partition).")
@output_option()
@pass_globals
def describe(g: Globals, group: str, time_lag: bool, output: str):
    """State, members, and per partition the committed offset, log end offset and lag."""
    doc = ops.describe_group(g.clients(), group, time_lag)
    members = Listing(doc["members"], [Column("member_id"), Column("client_id"), Column("host"),
                                       Column("assignment")])
    in_time = f", max time lag {format_duration(doc['max_time_lag_ms'])}" if time_lag else ""
    emit(Listing(
        rows=doc["partitions"],
        columns=[Column("topic"), Column("partition", justify="right"),
                 Column("committed", justify="right"), Column("end_offset", justify="right"),
                 Column("lag", justify="right")]
                + ([Column("time_lag_ms", "TIME LAG", justify="right", kind="ms")] if time_lag else []),
        document=doc,
        title=f"group {group}: {doc['state']}, {len(doc['members'])} member(s), "
              f"total lag {doc['total_lag']}{in_time}",
        extra_tables=[members] if doc["members"] else [],
        footer=[doc["note"]] if doc["note"] else [],
    ), output)
