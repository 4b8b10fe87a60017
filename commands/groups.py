"""kstool groups list|describe|delete: groups of every type, members and lag."""

from __future__ import annotations

import click

from kstool.base.documents import StreamsGroupDescription
from kstool.base.names import validate_name
from kstool.base.timeutil import format_duration
from kstool.commands.completion import complete_groups
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import confirm_or_refuse, named_argument, output_option, yes_option
from kstool.kafka import groups as ops
from kstool.output import Column, Listing, emit, info


@click.group()
def groups() -> None:
    """Consumer groups (= application ids), members, committed offsets and lag."""


@groups.command("list")
@output_option()
@pass_globals
def list_(g: Globals, output: str) -> None:
    """List the groups (consumer groups of both protocols, Kafka Streams apps' streams groups and
    share groups) with their type and state."""
    emit(Listing(ops.list_groups(g.clients()), [Column("group"), Column("type"), Column("state"), Column("simple")]),
         output)


@groups.command()
@named_argument("group", "The same as GROUP (kafka-consumer-groups.sh's spelling).", shell_complete=complete_groups)
@click.option("--time-lag", is_flag=True,
              help="Also the lag in time: how long the oldest unprocessed record of each partition has "
                   "waited (reads one record per lagging partition).")
@output_option()
@pass_globals
def describe(g: Globals, group: str, time_lag: bool, output: str) -> None:
    """State, members, and per partition the committed offset, log end offset and lag; for a
    streams group also its epochs and each member's active, standby and warm-up tasks; for a
    share group the start offset of each share-partition (empty: nothing delivered yet)."""
    doc = ops.describe_group(g.clients(), group, time_lag)
    members = Listing(doc["members"], [Column("member_id"), Column("client_id"), Column("host"),
                                       Column("assignment")])
    in_time = f", max time lag {format_duration(doc['max_time_lag_ms'])}" if time_lag else ""
    streams, epochs = doc.get("streams"), doc.get("streams") or doc.get("share")
    kind = (f"{doc['type']} group, epoch {epochs['group_epoch']}, assignment epoch {epochs['assignment_epoch']}, "
            if epochs else "")
    emit(Listing(
        rows=doc["partitions"],
        columns=[Column("topic"), Column("partition", justify="right"),
                 Column("committed", "START OFFSET" if doc["type"] == "share" else None, justify="right"),
                 Column("end_offset", justify="right"),
                 Column("lag", justify="right")]
                + ([Column("time_lag_ms", "TIME LAG", justify="right", kind="ms")] if time_lag else []),
        document=doc,
        title=f"group {group}: {kind}{doc['state']}, {len(doc['members'])} member(s), "
              f"total lag {doc['total_lag']}{in_time}",
        extra_tables=([members] if doc["members"] else []) + ([_tasks(streams)] if streams and streams["members"] else []),
        footer=[doc["note"]] if doc["note"] else [],
    ), output)


@groups.command()
@named_argument("group", "The same as GROUP (kafka-consumer-groups.sh's spelling).", shell_complete=complete_groups)
@click.option("--dry-run", is_flag=True, help="Show what would be deleted and change nothing.")
@yes_option("deleting the group (needed when not on a terminal)")
@output_option()
@pass_globals
def delete(g: Globals, group: str, dry_run: bool, yes: bool, output: str) -> None:
    """Delete a group without members, of any type (a share group's too): its committed offsets
    or share-partition state go with it."""
    validate_name(group, "group id")
    clients = g.clients()
    doc = ops.deletion_plan(clients, group)
    emit(Listing(doc["partitions"], [Column("topic"), Column("partition", justify="right"),
                                     Column("committed", "START OFFSET" if doc["type"] == "share" else None,
                                            justify="right")],
                 document={**doc, "dry_run": dry_run},
                 title=f"delete group {group} ({doc['type']}, {doc['state']}) and where it stands in "
                       f"{len(doc['partitions'])} partition(s)"), output)
    if dry_run:
        info("dry run: nothing was changed")
        return
    confirm_or_refuse(f"Delete group {group}?", yes)
    ops.delete_group(clients, group)
    info(f"group {group} deleted")


def _tasks(streams: StreamsGroupDescription) -> Listing:
    """A streams group's members and their tasks, as kafka-streams-groups.sh --members shows
    them: subtopology → partitions."""
    def tasks(kind: dict[str, list[int]]) -> str:
        return " ".join(f"{subtopology}:{partitions}" for subtopology, partitions in sorted(kind.items())) or "-"
    rows = [{"member_id": m["member_id"], "process_id": m["process_id"], "epoch": m["member_epoch"],
             "active": tasks(m["active_tasks"]), "standby": tasks(m["standby_tasks"]), "warmup": tasks(m["warmup_tasks"])}
            for m in streams["members"]]
    return Listing(rows, [Column("member_id"), Column("process_id"), Column("epoch", justify="right"),
                          Column("active", "ACTIVE TASKS"), Column("standby", "STANDBY TASKS"),
                          Column("warmup", "WARM-UP TASKS")])
