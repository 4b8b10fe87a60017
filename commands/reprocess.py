"""kstool reprocess: recompute an app's outputs from a time, plan first."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from kstool.base.names import validate_name
from kstool.base.timeutil import parse_time
from kstool.commands.completion import complete_apps
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import confirm_or_refuse, output_option, yes_option
from kstool.commands.run import KEPT_SETTINGS, EngineArgs, build_run_options, fail_if_cut_short, once_engine_options, progress_for
from kstool.engine import run_here_or_in_engine
from kstool.output import Column, Listing, dumps, emit, format_counts, info, shown_time

if TYPE_CHECKING:
    from kstool.reprocess.plan import ReprocessPlan


@click.command()
@click.option("--app-id", required=True, help="The kstool app to reprocess.", shell_complete=complete_apps)
@click.option("--from-time", metavar="TIME", help="Recompute the outputs of the records from this time on.")
@click.option("--to-time", metavar="TIME", help="... up to and including this time [default: all].")
@click.option("--from-beginning", is_flag=True,
              help="Empty state and the whole input from its log start (when the history --from-time needs is gone).")
@click.option("--accept-partial", is_flag=True,
              help="Empty state from --from-time, as Kafka's reset tool leaves it: totals count only the "
                   "records from then on (time windows: from the first window holding it).")
@click.option("--resume", is_flag=True,
              help="Finish a reprocess that a signal or a failure cut short, from where the app stands "
                   "(the same reprocess again would start over).")
@click.option("--dry-run", is_flag=True, help="Show the plan and change nothing (also while the app runs).")
@yes_option("rolling the app back (needed when not on a terminal)")
@output_option()
@once_engine_options
@pass_globals
def reprocess(g: Globals, app_id: str, from_time: str | None, to_time: str | None, from_beginning: bool,
              accept_partial: bool, resume: bool, dry_run: bool, yes: bool, output: str, engine: EngineArgs) -> None:
    """Recompute APP's outputs from a time, as one uninterrupted run would have written them: the
    app goes back to its state just before that time (its checkpoint keeps the history), then
    runs once. Plan first; exit 0 done (or nothing to do), 1 failed or refused, 75 app busy,
    130/143 cut short by a signal."""
    from kstool.application.model import AppPaths, load_manifest
    from kstool.reprocess.apply import reprocess as carry_out
    from kstool.reprocess.exceptions import HistoryGoneError, resume_advice
    from kstool.reprocess.plan import build_plan

    if from_beginning and (accept_partial or from_time):
        raise click.UsageError("--from-beginning reads the whole input: give no --from-time or --accept-partial")
    if resume and (from_beginning or accept_partial or from_time or to_time):
        raise click.UsageError("--resume goes on with the interrupted reprocess' own times: give no other")
    mode = "resume" if resume else "beginning" if from_beginning else "partial" if accept_partial else "rollback"
    paths = AppPaths(engine.state_dir, validate_name(app_id))
    manifest = load_manifest(paths)
    context = click.get_current_context()
    for name, value in (manifest.run_settings if manifest else {}).items():
        if name in KEPT_SETTINGS and context.get_parameter_source(name) is ParameterSource.DEFAULT:
            setattr(engine, name, value)  # as the app last ran, unless given here
    options = build_run_options(g, app_id, True, engine)
    clients = g.clients()
    plan = build_plan(clients, paths, parse_time(from_time) if from_time else None,
                      parse_time(to_time) if to_time else None, mode, plan_only=dry_run)
    as_json = output in ("json", "jsonl") or engine.report == "json"
    # JSON: one document, the plan's where nothing runs, else the run's (which holds the plan); -q with
    # --yes (cron's line): nothing unless the plan is all there is to say
    if dry_run or plan.nothing_to_do or (plan.refusal and as_json) or not (as_json or engine.quiet):
        _show_plan(plan, "json" if as_json else output, dry_run)
    if plan.refusal:
        raise HistoryGoneError(plan.refusal)
    if dry_run or plan.nothing_to_do:
        info("dry run: nothing was changed" if dry_run else "nothing was changed")
        return
    confirm_or_refuse(f"Reprocess {app_id} as planned?", yes)
    result = run_here_or_in_engine(carry_out, clients, plan, options, name=app_id, spark=options.spark,
                                   progress=progress_for(app_id, engine.quiet), use_engine=not engine.no_engine)
    if as_json:
        click.echo(dumps(result.to_dict()))
    elif not engine.quiet and result.finished:
        run_summary = result.run
        info(f"kstool: {app_id}: " + ("resumed the reprocess" if resume else "reprocessed")
             + f" from {shown_time(plan.from_time) if plan.from_time is not None else 'the beginning'}"
             + (f" to {shown_time(plan.to_time)}" if plan.to_time is not None else "")
             + f": {run_summary.input_records} records in {run_summary.batches} batch(es), written "
             + format_counts(run_summary.written))
    if not result.finished:  # a stop after the last batch cut nothing short
        fail_if_cut_short(result.run, resume_advice(app_id))


def _show_plan(plan: ReprocessPlan, output: str, dry_run: bool) -> None:
    if plan.refusal:
        title = f"reprocess of {plan.app_id} REFUSED, nothing was changed (why: below)"
    elif plan.nothing_to_do:
        title = f"reprocess plan for {plan.app_id}: nothing to do"
    elif plan.mode == "resume":
        title = f"reprocess plan for {plan.app_id}: resume the interrupted reprocess; read {plan.records} records"
    elif plan.mode == "rollback" and plan.restart_batch is not None:
        back = ("before its first batch (empty state)" if plan.restart_batch < 0 else
                f"to batch {plan.restart_batch} (run {shown_time(plan.restart_batch_time)})")
        title = (f"reprocess plan for {plan.app_id}: roll back {back}, undoing {plan.batches_undone} "
                 f"batch(es); read {plan.records} records")
    else:
        title = f"reprocess plan for {plan.app_id} ({plan.mode}): read {plan.records} records"
    rows = [{**p.__dict__, "restart_at": p.restart_time} for p in plan.partitions]
    steps = plan.steps()
    emit(Listing(rows, [Column("topic"), Column("partition", justify="right"),
                        Column("from_time_offset", "FROM-TIME OFFSET", justify="right"),
                        Column("processed", justify="right"), Column("restart", justify="right"),
                        Column("end", justify="right"), Column("records", justify="right"),
                        Column("restart_at", "FIRST RECORD AT", kind="time")],
                 document={**plan.to_dict(), "dry_run": dry_run}, title=title,
                 extra_tables=[Listing(steps, [Column("step", "STEPS, IN ORDER"), Column("target")])] if steps else [],
                 footer=[f"note: {n}" for n in plan.notes]), output)
