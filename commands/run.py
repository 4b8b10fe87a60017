"""kstool run TOPOLOGY: run a Kafka-Streams-style application on Spark."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from kstool.config import parse_key_values
from kstool.names import validate_name
from kstool.output import dumps, format_counts, info
from kstool.timeutil import parse_duration, parse_time

from kstool.commands.completion import complete_apps, complete_topics
from kstool.commands.context import Globals, pass_globals


def app_options(func):
    """--app-id and --once, for `run` commands (reprocess names its app and always runs once)."""
    func = click.option("--once", is_flag=True, help="Process what is available now, then exit (cron).")(func)
    return click.option("--app-id", shell_complete=complete_apps,
                        help="Application id: consumer group and internal topic prefix "
                             "[default: the topology name].")(func)


def engine_options(func):
    """The options every run shares: run mode, errors, Spark."""
    decorators = [
        click.option("--trigger", default="1s", show_default=True, metavar="DURATION",
                     help="Micro-batch interval when running continuously."),
        click.option("--from", "starting", type=click.Choice(["earliest", "latest"]), default="earliest",
                     show_default=True, help="Where a new app starts when its group has no offsets."),
        click.option("--max-records-per-batch", type=click.IntRange(min=1), default=1_000_000,
                     show_default=True, help="Admission control: records per micro-batch."),
        click.option("--on-error", default="fail", show_default=True, metavar="fail|skip|dlq:TOPIC",
                     help="What to do with input records that cannot be processed."),
        click.option("--processing-guarantee", type=click.Choice(["at_least_once", "exactly_once_v2"]),
                     default="at_least_once", show_default=True,
                     help="exactly_once_v2: output, changelog and input offsets commit in one Kafka transaction per batch."),
        click.option("--late-topic", metavar="TOPIC",
                     help="Windows and joins: write late records here (key, value, event time): "
                          "dropped by a window, or too old for a stream-stream join's store."),
        click.option("--on-data-loss", type=click.Choice(["fail", "earliest"]), default="fail",
                     show_default=True, help="Input offsets deleted by retention: fail, or go on from the log start."),
        click.option("--state-dir", type=click.Path(file_okay=False), help="Where app state lives "
                     "[default: $KSTOOL_HOME/apps]."),
        click.option("--master", default="local[*]", show_default=True, help="Spark master URL."),
        click.option("--conf", "spark_conf", multiple=True, metavar="KEY=VALUE", help="Spark config (repeatable)."),
        click.option("--spark-ui", is_flag=True, help="Enable the Spark UI."),
        click.option("--quiet", "-q", is_flag=True, help="No progress output."),
        click.option("--report", type=click.Choice(["text", "json"]), default="text",
                     show_default=True, help="Final summary: a line on stderr, or JSON on stdout."),
    ]
    return functools.reduce(lambda f, d: d(f), reversed(decorators), func)


def build_run_options(g: Globals, app_id: str, kw: dict):
    from kstool.engine.app import default_state_dir
    from kstool.engine.errors_policy import ErrorPolicy
    from kstool.engine.runtime import RunOptions
    from kstool.engine.session import SparkOptions

    return RunOptions(
        app_id=validate_name(app_id),
        state_dir=Path(kw["state_dir"]).expanduser() if kw["state_dir"] else default_state_dir(),
        once=kw["once"], trigger_ms=parse_duration(kw["trigger"]), starting=kw["starting"],
        max_records_per_batch=kw["max_records_per_batch"],
        on_error=ErrorPolicy.parse(kw["on_error"]), on_data_loss=kw["on_data_loss"], quiet=kw["quiet"],
        processing_guarantee=kw["processing_guarantee"], late_topic=kw["late_topic"],
        spark=SparkOptions(master=kw["master"], conf=parse_key_values(kw["spark_conf"], "--conf"),
                           ui=kw["spark_ui"], debug=g.debug))


def execute(g: Globals, topology, app_id: str | None, kw: dict) -> None:
    from kstool.engine.runtime import run_app

    options = build_run_options(g, app_id or topology.name, kw)
    summary = run_app(g.clients(), topology, options)
    if kw["report"] == "json":
        click.echo(dumps(summary.to_dict()))
    elif not kw["quiet"]:
        bad = f", {summary.bad_records} bad record(s)" if summary.bad_records else ""
        bad += f", {summary.late_records} late record(s)" if summary.late_records else ""
        info(f"kstool: {summary.app_id}: {summary.batches} batch(es), {summary.input_records} records "
             f"in {summary.processing_seconds:.1f}s, written {format_counts(summary.written)}{bad}")


@click.group()
def run():
    """Run a topology (wordcount, aggregate, join) on Spark, reading and writing Kafka topics."""


@run.command()
@click.option("--input", "input_topic", required=True, metavar="TOPIC", help="Topic of text lines.",
              shell_complete=complete_topics)
@click.option("--output", "output_topic", required=True, metavar="TOPIC", help="Topic of word counts.",
              shell_complete=complete_topics)
@click.option("--value-format", type=click.Choice(["long", "string", "json"]), default="long",
              show_default=True, help="Count encoding in the output topic (long = Kafka's LongSerializer).")
@app_options
@engine_options
@pass_globals
def wordcount(g: Globals, input_topic, output_topic, value_format, app_id, **kw):
    """Count words of UTF-8 lines; emit each changed count (KTable updates)."""
    from kstool.topologies.wordcount import WordCount

    execute(g, WordCount(input_topic, output_topic, value_format), app_id, kw)


@click.command()
@click.option("--app-id", required=True, help="The kstool app to reprocess.", shell_complete=complete_apps)
@click.option("--from-time", required=True, metavar="TIME", help="Reprocess records from this time on.")
@click.option("--to-time", metavar="TIME", help="... up to and including this time [default: all].")
@engine_options
@pass_globals
def reprocess(g: Globals, app_id, from_time, to_time, **kw):
    """Reset APP to a time and run it once over the range (for cron: exit 0 done, 1 failed,
    75 app busy)."""
    from kstool.reprocess import reprocess as run_reprocess

    options = build_run_options(g, app_id, {**kw, "once": True})
    result = run_reprocess(g.clients(), options, parse_time(from_time),
                           parse_time(to_time) if to_time else None)
    if kw["report"] == "json":
        click.echo(dumps(result.to_dict()))
    elif not kw["quiet"]:
        run_summary = result.run
        info(f"kstool: {app_id}: reprocessed from {from_time}"
             + (f" to {to_time}" if to_time else "")
             + f": {run_summary.input_records} records in {run_summary.batches} batch(es), written "
             + format_counts(run_summary.written))


@run.command()
@click.option("--input", "input_topic", required=True, metavar="TOPIC", shell_complete=complete_topics)
@click.option("--output", "output_topic", required=True, metavar="TOPIC", shell_complete=complete_topics)
@click.option("--agg", type=click.Choice(["count", "sum", "min", "max", "avg"]), default="count", show_default=True)
@click.option("--value-field", metavar="PATH", help="The number is this JSON field (dot path) of the value.")
@click.option("--group-by", default="key", show_default=True, metavar="key|field:PATH",
              help="Group by the record key, or re-key by a JSON field of the value.")
@click.option("--input-value-format", type=click.Choice(["text", "long", "double", "json"]), default="text",
              show_default=True, help="How input values hold their number.")
@click.option("--value-format", type=click.Choice(["auto", "string", "json"]), default="auto", show_default=True,
              help="auto: 8-byte long for counts and whole sums/min/max, 8-byte double otherwise.")
@click.option("--window", metavar="SPEC",
              help="tumbling:SIZE | hopping:SIZE,ADVANCE | session:GAP (epoch-aligned, as Kafka Streams).")
@click.option("--grace", default="0ms", show_default=True, metavar="DURATION",
              help="How long after a window's end records are still accepted (later: dropped, counted).")
@click.option("--time", "time_spec", default="record", show_default=True, metavar="record|field:PATH",
              help="Event time: the record timestamp, or a JSON field (epoch ms or ISO-8601).")
@click.option("--emit", type=click.Choice(["update", "final"]), default="update", show_default=True,
              help="update: every change; final: each window once, after end + grace (suppress).")
@click.option("--key-format", type=click.Choice(["windowed", "json"]), default="windowed", show_default=True,
              help="Windowed output keys: Kafka Streams' layout (key+start, sessions key+end+start) or JSON.")
@app_options
@engine_options
@pass_globals
def aggregate(g: Globals, input_topic, output_topic, agg, value_field, group_by, input_value_format,
              value_format, window, grace, time_spec, emit, key_format, app_id, **kw):
    """Aggregate numbers per key (count, sum, min, max, avg), optionally in windows; emit each
    changed aggregate, or each window's final result."""
    from kstool.topologies.aggregate import Aggregate

    execute(g, Aggregate(input_topic, output_topic, agg, value_field, group_by, input_value_format,
                         value_format, window, parse_duration(grace), time_spec, emit, key_format),
            app_id, kw)


@run.command()
@click.option("--left", "left_topic", required=True, metavar="TOPIC", shell_complete=complete_topics)
@click.option("--right", "right_topic", required=True, metavar="TOPIC", shell_complete=complete_topics)
@click.option("--output", "output_topic", required=True, metavar="TOPIC", shell_complete=complete_topics)
@click.option("--kind", type=click.Choice(["stream-stream", "stream-table", "table-table"]),
              default="stream-stream", show_default=True, help="Which sides are streams and which tables.")
@click.option("--how", type=click.Choice(["inner", "left", "outer"]), default="inner", show_default=True)
@click.option("--within", metavar="DURATION", help="stream-stream: how far apart two records' timestamps may be.")
@click.option("--grace", default="0ms", show_default=True, metavar="DURATION",
              help="stream-stream: how long after the window records are still accepted.")
@click.option("--joiner", type=click.Choice(["json", "concat"]), default="json", show_default=True,
              help='json: {"left": ..., "right": ...}; concat: left + separator + right.')
@click.option("--separator", default=",", show_default=True, help="For --joiner concat.")
@click.option("--repartition", is_flag=True, help="Re-group both inputs by key when their partition counts differ.")
@app_options
@engine_options
@pass_globals
def join(g: Globals, left_topic, right_topic, output_topic, kind, how, within, grace, joiner, separator,
         repartition, app_id, **kw):
    """Join two topics by key: stream-stream (windowed), stream-table or table-table."""
    from kstool.topologies.join import Join

    execute(g, Join(left_topic, right_topic, output_topic, kind, how,
                    parse_duration(within) if within else None, parse_duration(grace), joiner, separator,
                    repartition), app_id, kw)
