"""kstool reset: reset an application's offsets, internal topics and local state."""

from __future__ import annotations

from pathlib import Path

import click

from kstool.application.model import resolve_state_dir
from kstool.base.names import validate_name
from kstool.commands.completion import complete_groups
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import confirm_or_refuse, output_option, yes_option
from kstool.output import Column, Listing, emit, info, warn
from kstool.reset.apply import apply_plan
from kstool.reset.offset_spec import build_spec, format_offsets_csv
from kstool.reset.plan import ResetOptions, ResetPlan, build_plan


def _topic_list(values: tuple[str, ...]) -> list[str]:
    """Kafka's tools take comma-separated lists; kstool also takes the option repeated."""
    return [t.strip() for v in values for t in v.split(",") if t.strip()]


@click.command()
@click.option("--application-id", "--app-id", "app_id", required=True, shell_complete=complete_groups,
              help="The application id (= consumer group) to reset, or a share group.")
@click.option("--input-topics", multiple=True, metavar="T[,T...]",
              help="Input topics (default for kstool apps: from the manifest).")
@click.option("--intermediate-topics", multiple=True, metavar="T[,T...]",
              help="Intermediate topics: the group is moved to their end (deprecated in Kafka).")
@click.option("--internal-topics", multiple=True, metavar="T[,T...]",
              help="Internal topics to delete; must be among the detected ones [default: all of them].")
@click.option("--to-earliest", is_flag=True, help="Reset inputs to the log start (the default).")
@click.option("--to-latest", is_flag=True, help="Reset inputs to the log end.")
@click.option("--to-offset", type=click.IntRange(min=0), metavar="N", help="Reset inputs to offset N.")
@click.option("--to-datetime", metavar="TIME", help="Reset to the first record at or after TIME (UTC unless a zone is given).")
@click.option("--by-duration", metavar="DURATION", help="Reset to the first record at or after now - DURATION (PnDTnHnMnS, 1h).")
@click.option("--shift-by", type=int, metavar="N", help="Move committed offsets by N (may be negative).")
@click.option("--from-file", type=click.Path(dir_okay=False), metavar="CSV", help="Offsets from CSV lines topic,partition,offset.")
@click.option("--dry-run", is_flag=True, help="Show the plan and change nothing at all.")
@click.option("--force", is_flag=True, help="Remove active group members first.")
@click.option("--state-dir", type=click.Path(file_okay=False), help="Where the app's local state lives [default: $KSTOOL_HOME/apps].")
@click.option("--keep-local-state", is_flag=True, help="Do not delete the app's local state.")
@click.option("--export", type=click.Path(dir_okay=False), metavar="CSV", help="Write the planned offsets as CSV (for --from-file).")
@yes_option("applying the reset (needed when not on a terminal)")
@output_option()
@pass_globals
def reset(g: Globals, app_id: str, input_topics: tuple[str, ...], intermediate_topics: tuple[str, ...],
          internal_topics: tuple[str, ...], to_earliest: bool, to_latest: bool, to_offset: int | None,
          to_datetime: str | None, by_duration: str | None, shift_by: int | None, from_file: str | None,
          dry_run: bool, force: bool, state_dir: str | None, keep_local_state: bool, export: str | None, yes: bool,
          output: str) -> None:
    """Reset an application so it reprocesses its input: plan, then commit the new offsets,
    delete its internal topics and its local state (what Kafka's tool leaves to you)."""
    validate_name(app_id)
    spec = build_spec(to_earliest, to_latest, to_offset, to_datetime, by_duration, shift_by, from_file)
    root = resolve_state_dir(state_dir)
    options = ResetOptions(
        app_id=app_id, spec=spec, state_dir=root,
        input_topics=_topic_list(input_topics) if input_topics else None,
        intermediate_topics=_topic_list(intermediate_topics),
        internal_topics=_topic_list(internal_topics) if internal_topics else None,
        state_dir_given=state_dir is not None, keep_local_state=keep_local_state, force=force, plan_only=dry_run)
    clients = g.clients()
    plan = build_plan(clients, options)
    for message in plan.warnings:
        warn(message)
    if export:
        Path(export).write_text(format_offsets_csv(plan.new_offsets()), encoding="utf-8")
        info(f"planned offsets written to {export}")
    _show(plan, output, dry_run)
    if dry_run:
        info("dry run: nothing was changed")
        return
    confirm_or_refuse(f"Apply this reset to {app_id}?", yes)
    for step in apply_plan(clients, plan, root):
        info(f"{step.step}: {step.status}")


def _show(plan: ResetPlan, output: str, dry_run: bool) -> None:
    rows = [c.__dict__ for c in plan.offsets]
    extra = []
    if output == "table":
        deletes = [{"what": "topic", "name": t} for t in plan.topics_to_delete]
        if plan.local_state:
            deletes.append({"what": f"local state ({plan.local_state.kind})", "name": plan.local_state.path})
            if plan.local_state.checkpoint_location:
                deletes.append({"what": "checkpoint", "name": plan.local_state.checkpoint_location})
        deletes += [{"what": "member", "name": f"{m['client_id']}@{m['host']} {m['member_id']}"}
                    for m in plan.members]
        if deletes:
            extra.append(Listing(deletes, [Column("what", "TO DELETE"), Column("name")]))
    document = {**plan.to_dict(), "dry_run": dry_run}
    emit(Listing(rows, [Column("topic"), Column("partition", justify="right"), Column("kind"),
                        Column("current", justify="right"), Column("target", "NEW", justify="right"),
                        Column("delta", justify="right"), Column("note")],
                 document=document, title=f"reset plan for {plan.app_id} "
                                          f"({'share group' if plan.app_kind == 'share-group' else plan.app_kind + ' app'}, "
                                          f"{plan.spec})",
                 extra_tables=extra), output)
