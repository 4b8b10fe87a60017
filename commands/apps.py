"""kstool apps list|describe: the apps kstool finds in its state dir."""

from __future__ import annotations

import click

from kstool import apps as ops
from kstool.commands.completion import complete_apps
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import output_option, state_dir_option
from kstool.output import Column, Listing, emit


@click.group()
def apps():
    """Applications in the state dir: topology, progress, lag, stores."""


@apps.command("list")
@state_dir_option()
@output_option()
def list_(state_dir, output):
    """List apps with their topology, topics, last committed batch and whether they run."""
    rows = ops.list_apps(state_dir)
    emit(Listing(rows, [Column("app_id"), Column("topology"), Column("input_topics"),
                        Column("output_topics"), Column("last_batch", justify="right"),
                        Column("running_pid", "RUNNING PID", justify="right")]), output)


@apps.command()
@click.argument("app_id", shell_complete=complete_apps)
@state_dir_option()
@click.option("--offline", is_flag=True, help="Do not ask Kafka for the group's lag.")
@output_option()
@pass_globals
def describe(g: Globals, app_id, state_dir, offline, output):
    """Topology, last committed batch, processed offsets, group lag, stores of APP_ID."""
    doc = ops.describe_app(None if offline else g.clients(), state_dir, app_id)
    group = doc["group"] or {}
    lag = {(p["topic"], p["partition"]): p["lag"] for p in group.get("partitions", [])}
    rows = [{**p, "lag": lag.get((p["topic"], p["partition"]))} for p in doc["processed_offsets"]]
    stores = Listing([s for s in doc["stores"]],
                     [Column("name", "STORE"), Column("kind"), Column("changelog_topic"),
                      Column("key_format"), Column("value_format")])
    title = (f"app {doc['app_id']}: {doc['topology']}, last committed batch "
             f"{doc['last_committed_batch']}, "
             f"{'running (pid %s)' % doc['running_pid'] if doc['running_pid'] else 'not running'}, "
             f"group lag {group.get('total_lag', '-')}")
    emit(Listing(rows, [Column("topic"), Column("partition", justify="right"),
                        Column("offset", "PROCESSED", justify="right"), Column("lag", justify="right")],
                 document=doc, title=title, extra_tables=[stores]), output)
