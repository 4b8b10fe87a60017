"""kstool run TOPOLOGY: run a Kafka-Streams-style application on Spark."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from kstool.base.names import validate_name
from kstool.base.timeutil import parse_duration
from kstool.checkpoint.location import normalize_location
from kstool.commands.completion import complete_apps
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import (
    F,
    SchemaFlags,
    gathered,
    setting_option,
    state_dir_option,
)
from kstool.config import parse_key_values
from kstool.contract import DEFAULT_CACHE_MAX_BYTES, Topology
from kstool.engine import (
    BATCH_RECORDS,
    COMBINED_BATCH_RECORDS,
    GUARANTEES,
    ON_DATA_LOSS,
    STARTING,
    Progress,
    RunOptions,
    RunSummary,
    run_here_or_in_engine,
)
from kstool.kafka.topics import BROKER_DEFAULT
from kstool.output import RunReporter, dumps, format_counts, info
from kstool.topologies import REGISTRY
from kstool.topologies.spec import DURATION, TopologyType


def app_options(func: F) -> F:
    """--app-id, --once and --restore-missing-state, for `run` commands (reprocess names its app
    and always runs once)."""
    func = click.option("--restore-missing-state", is_flag=True,
                        help="When the checkpoint's state is missing, restore it from the changelogs "
                             "(as `kstool state restore`) and go on.")(func)
    func = click.option("--once", is_flag=True, help="Process what is available now, then exit (cron).")(func)
    return click.option("--app-id", shell_complete=complete_apps,
                        help="Application id: consumer group and internal topic prefix "
                             "[default: the topology name].")(func)


@dataclass
class EngineArgs:
    """What every run takes besides its topology: run mode, errors, Spark, reporting."""

    max_records_per_batch: int | None
    on_error: str
    processing_guarantee: str
    late_topic: str | None
    on_data_loss: str
    broker_timeout: str
    state_dir: Path
    checkpoint_location: str | None
    master: str
    spark_conf: tuple[str, ...]
    spark_ui: bool
    quiet: bool
    report: str
    no_engine: bool
    schema_registry: str | None
    value_schema: str | None
    no_header: bool
    history_batches: int | None
    replication_factor: int | None
    statestore_cache_max_bytes: int
    # how a continuous or new app runs: not options of `reprocess`, which runs once from its plan
    trigger: str = "1s"
    starting: str = "earliest"


# the run options an app keeps in its manifest (the last run's, as given): `reprocess` runs the
# app with them unless its own command line gives them (Spark --conf may hold secrets: not kept)
KEPT_SETTINGS = ("max_records_per_batch", "on_error", "processing_guarantee", "late_topic", "on_data_loss",
                 "broker_timeout", "master", "schema_registry", "value_schema", "no_header", "replication_factor",
                 "statestore_cache_max_bytes")


_RUN_MODE_OPTIONS = (
    click.option("--trigger", default="1s", show_default=True, metavar="DURATION",
                 help="Micro-batch interval when running continuously."),
    click.option("--from", "starting", type=click.Choice(STARTING), default="earliest",
                 show_default=True, help="Where a new app starts when its group has no offsets."),
)
_ENGINE_OPTIONS = (
    click.option("--max-records-per-batch", type=click.IntRange(min=1), metavar="N",
                 help=f"Admission control: records per micro-batch [default: {BATCH_RECORDS}; "
                      f"{COMBINED_BATCH_RECORDS} where the source combines them]."),
    click.option("--on-error", default="fail", show_default=True, metavar="fail|skip|dlq:TOPIC",
                 help="What to do with input records that cannot be processed."),
    click.option("--processing-guarantee", type=click.Choice(GUARANTEES),
                 default="at_least_once", show_default=True,
                 help="exactly_once_v2: output, changelog and input offsets commit in one Kafka transaction per batch."),
    click.option("--late-topic", metavar="TOPIC",
                 help="Windows and joins: write late records here (key, value, event time): "
                      "dropped by a window, or too old for a stream-stream join's store."),
    click.option("--on-data-loss", type=click.Choice(ON_DATA_LOSS), default="fail",
                 show_default=True, help="Input offsets deleted by retention: fail, or go on from the log start."),
    click.option("--broker-timeout", default="2m", show_default=True, metavar="DURATION",
                 help="How long a run waits for Kafka to come back after an outage before it fails."),
    state_dir_option(),
    click.option("--checkpoint-location", metavar="URI",
                 help="The Spark checkpoint on storage every executor shares (file:///shared/..., "
                      "hdfs://..., s3a://...); kept in the app's manifest [default: inside the app's folder]."),
    click.option("--master", default="local[*]", show_default=True, help="Spark master URL."),
    click.option("--conf", "spark_conf", multiple=True, metavar="KEY=VALUE", help="Spark config (repeatable)."),
    click.option("--spark-ui", is_flag=True, help="Enable the Spark UI."),
    click.option("--quiet", "-q", is_flag=True, help="No progress output."),
    click.option("--report", type=click.Choice(["text", "json"]), default="text",
                 show_default=True, help="Final summary: a line on stderr, or JSON on stdout."),
    click.option("--no-engine", is_flag=True,
                 help="Run in this process: neither use the warm engine nor start one (also KSTOOL_ENGINE=off)."),
    click.option("--schema-registry", metavar="URL",
                 help="With --input-value-format avro|protobuf|jsonschema: the Schema Registry (else schema.registry.url "
                      "from --command-config)."),
    click.option("--value-schema", type=click.Path(dir_okay=False), metavar="FILE",
                 help="With --input-value-format avro|protobuf|jsonschema: the values' schema file (.avsc, .proto, .json)."),
    click.option("--no-header", is_flag=True,
                 help="With --input-value-format avro|protobuf|jsonschema: bare payloads, no wire-format header."),
    click.option("--history-batches", type=click.IntRange(min=2), metavar="N",
                 help="Batches of history the checkpoint keeps: how far back `kstool reprocess` and "
                      "`state --batch-id` reach [default: the app's; 1000 for a new app]."),
    click.option("--replication-factor", type=click.IntRange(min=1), metavar="N",
                 help="Replicas of each topic the run creates: outputs, changelogs, dead letters, late records "
                      "(Kafka Streams' replication.factor) [default: the broker's default.replication.factor]."),
    click.option("--statestore-cache-max-bytes", type=click.IntRange(min=0), default=DEFAULT_CACHE_MAX_BYTES,
                 show_default=True, metavar="BYTES",
                 help="The record cache of a table-table join's tables, per task and micro-batch (Kafka Streams' "
                      "statestore.cache.max.bytes): each key's updates collapse to its last; 0 writes every update."),
)
engine_options = gathered("engine", EngineArgs, *_RUN_MODE_OPTIONS, *_ENGINE_OPTIONS)
once_engine_options = gathered("engine", EngineArgs, *_ENGINE_OPTIONS)  # reprocess


def build_run_options(g: Globals, app_id: str, once: bool, engine: EngineArgs) -> RunOptions:
    from kstool.engine import ErrorPolicy, SparkOptions

    return RunOptions(
        app_id=validate_name(app_id), state_dir=engine.state_dir,
        checkpoint_location=normalize_location(engine.checkpoint_location) if engine.checkpoint_location else None,
        once=once, trigger_ms=parse_duration(engine.trigger), starting=engine.starting,
        max_records_per_batch=engine.max_records_per_batch,
        on_error=ErrorPolicy.parse(engine.on_error), on_data_loss=engine.on_data_loss,
        processing_guarantee=engine.processing_guarantee, late_topic=engine.late_topic,
        broker_timeout_s=parse_duration(engine.broker_timeout) / 1000,
        spark=SparkOptions(master=engine.master, conf=parse_key_values(engine.spark_conf, "--conf"),
                           ui=engine.spark_ui, debug=g.debug, long_lived=not once),
        input_schemas=SchemaFlags(engine.schema_registry, value_schema=engine.value_schema,
                                  no_header=engine.no_header).options(g.client_config().schema_registry),
        history_batches=engine.history_batches,
        replication_factor=engine.replication_factor or BROKER_DEFAULT,
        cache_max_bytes=engine.statestore_cache_max_bytes,
        combine=os.environ.get("KSTOOL_COMBINE", "on") != "off",
        settings={name: getattr(engine, name) for name in KEPT_SETTINGS})


def progress_for(app_id: str, quiet: bool) -> Progress:
    from kstool.engine import Silent

    return Silent() if quiet else RunReporter(app_id)


def execute(g: Globals, topology: Topology, app_id: str | None, once: bool, restore_missing_state: bool, engine: EngineArgs) -> None:
    from kstool.engine import run_app
    from kstool.state.restore import run_restoring

    options = build_run_options(g, app_id or topology.name, once, engine)
    summary = run_here_or_in_engine(run_restoring if restore_missing_state else run_app, g.clients(),
                                    topology, options, name=options.app_id, spark=options.spark,
                                    progress=progress_for(options.app_id, engine.quiet),
                                    use_engine=not engine.no_engine)
    if engine.report == "json":
        click.echo(dumps(summary.to_dict()))
    elif not engine.quiet:
        bad = f", {summary.bad_records} bad record(s)" if summary.bad_records else ""
        bad += f", {summary.late_records} late record(s)" if summary.late_records else ""
        info(f"kstool: {summary.app_id}: {summary.batches} batch(es), {summary.input_records} records "
             f"in {summary.processing_seconds:.1f}s, written {format_counts(summary.written)}{bad}")
    if once:  # a continuous run ends by a signal; bounded work cut short is not done (cron must see it)
        fail_if_cut_short(summary, "run the same command to go on from there")


def fail_if_cut_short(summary: RunSummary, finish: str) -> None:
    from kstool.base.errors import Interrupted
    from kstool.engine import last_stop_signal

    if summary.stopped_by_signal:
        raise Interrupted(f"interrupted: {summary.where_it_stopped()}; {finish}", last_stop_signal())


@click.group(help=f"Run a topology ({', '.join(REGISTRY)}) on Spark, reading and writing Kafka topics.")
def run() -> None:
    pass


def topology_command(kind: TopologyType) -> click.Command:
    """`kstool run NAME`: the topology's settings, then the options every run takes."""

    def command(g: Globals, app_id: str | None, once: bool, restore_missing_state: bool, engine: EngineArgs,
                **settings: Any) -> None:
        for s in kind.settings:
            if s.kind == DURATION and settings[s.name] is not None:
                settings[s.name] = parse_duration(settings[s.name])
        execute(g, kind.create(**settings), app_id, once, restore_missing_state, engine)

    command.__doc__ = kind.help
    decorated = app_options(engine_options(pass_globals(command)))
    for setting in reversed(kind.settings):
        decorated = setting_option(setting)(decorated)
    return click.command(kind.name)(decorated)


for _kind in REGISTRY.values():
    run.add_command(topology_command(_kind))
