"""A run's streaming query, built in one place: the Kafka source and its options (a combiner, a
value schema, a restore's changelogs, a parked query's gate), --on-error, the topology's plan,
the sink's foreachBatch writer, the checkpoint. Its trigger and how it is watched are its
driver's (kstool.engine.query.drivers)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, cast

from kstool.config import ClientConfig
from kstool.contract import PARTIAL, RESTORED, CombinerSpec, TaskTopology, Topology
from kstool.engine.io import errors_policy
from kstool.engine.io.sink import BatchReport, KafkaSink
from kstool.engine.io.source_options import (
    CLIENT_CONFIG_FILE_OPTION,
    COMBINER_OPTION,
    GATE_FILE_OPTION,
    SEED_TOPICS_OPTION,
    SOURCE_NAME,
    VALUE_SCHEMA_OPTION,
    nest_offsets,
    write_client_config,
)
from kstool.engine.query.batches import INPUT_METRICS
from kstool.engine.query.options import RunOptions
from kstool.engine.query.run_plan import RunPlan
from kstool.engine.query.seed import seed_entries
from kstool.schemas.formats import SchemaOptions

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter

    from kstool.engine.io.sink import BatchWriter


@dataclass(frozen=True)
class SourceInput:
    """How the executors read the inputs: the client configuration (with the schema registry's
    settings when values have a schema) and the values' schema (JSON), decoded where they are read."""
    config: ClientConfig
    value_schema: str | None = None


@dataclass
class BuiltQuery:
    stream: DataStreamWriter  # without a trigger
    reports: dict[int, BatchReport]  # the sink's report per batch id, as batches are written


def source_input(config: ClientConfig, fmt: str | None, options: RunOptions) -> SourceInput:
    """fmt: the schema format of the input values (TopologyFacts.value_format)."""
    if fmt is None:
        return SourceInput(config)
    given = (options.input_schemas or SchemaOptions()).with_texts()
    value_schema = json.dumps({"format": fmt, "value_schema": given.value_schema,
                               "value_schema_text": given.value_schema_text, "framed": given.framed})
    return SourceInput(dataclasses.replace(config, schema_registry=given.registry), value_schema)


def build_query(spark: SparkSession, topology: Topology, plan: RunPlan, sink: KafkaSink, inputs: SourceInput,
                gate: Path | None = None) -> BuiltQuery:
    """gate: a parked query's gate file (kstool.engine.query.parking), which its source reads up to."""
    client_config_file = str(write_client_config(inputs.config, plan.paths.client_config))
    if hasattr(topology, "forwards_headers") and not plan.manifest.aggregate_headers:
        topology = dataclasses.replace(topology, forwards_headers=False)  # type: ignore[type-var]
    if hasattr(topology, "cache_max_bytes"):
        topology = dataclasses.replace(topology, cache_max_bytes=plan.options.cache_max_bytes)  # type: ignore[type-var]
    combiner = _combiner(plan.facts.combiner, plan.options)
    source = _source(spark, plan, inputs, client_config_file, combiner, gate)
    checked = _checked(source, topology.valid_record(), plan, inputs.config)
    if plan.seed is not None and plan.seed.per_task:  # a per-task topology's seed (plan_seed)
        seed = seed_entries(spark, client_config_file, plan.seed)
        updates = cast(TaskTopology, topology).build(checked, plan.partitions, seed=seed)
    else:
        updates = topology.build(checked, plan.partitions)
    reports: dict[int, BatchReport] = {}
    stream = (updates.writeStream.outputMode("update")
              .foreachBatch(_batch_writer(sink, topology.encode, plan, reports))
              .option("checkpointLocation", plan.checkpoint.uri).queryName(plan.options.app_id))
    return BuiltQuery(stream, reports)


def _combiner(combiner: CombinerSpec | None, options: RunOptions) -> CombinerSpec | None:
    """The topology's combiner (TopologyFacts.combiner), unless this run reads record by record."""
    if not options.combine:
        return None
    if combiner is not None and combiner.counts_late and options.late_topic:
        return None  # the late topic gets each late record itself
    return combiner


def _source(spark: SparkSession, plan: RunPlan, inputs: SourceInput, client_config_file: str,
            combiner: CombinerSpec | None, gate: Path | None) -> DataFrame:
    options, seed = plan.options, plan.seed
    reader = spark.readStream.format(SOURCE_NAME).option(CLIENT_CONFIG_FILE_OPTION, client_config_file)
    if inputs.value_schema is not None:
        reader = reader.option(VALUE_SCHEMA_OPTION, inputs.value_schema)
    if combiner is not None:
        reader = reader.option(COMBINER_OPTION, json.dumps(dataclasses.asdict(combiner)))
    if gate is not None:
        reader = reader.option(GATE_FILE_OPTION, str(gate))
    reduces = combiner is not None and combiner.reduces
    source = (reader
              .option("topics", ",".join(plan.facts.input_topics))
              .option("group", options.app_id)
              .option("starting", options.starting)
              .option("on_data_loss", options.on_data_loss)
              .option("max_records_per_batch", str(options.batch_records(combined=reduces)))
              .option("max_records_per_task", str(options.max_records_per_task))
              .option("stop_offsets", json.dumps(nest_offsets(options.stop_offsets)))
              # exactly_once_v2 commits offsets inside each output transaction instead
              .option("commit_offsets", str(options.processing_guarantee == "at_least_once").lower())
              .option("seed_batch", str(seed is not None).lower())
              .option(SEED_TOPICS_OPTION, ",".join(seed.changelogs if seed is not None and not seed.per_task else []))
              .load())
    if combiner is None:
        return source
    from pyspark.sql import functions as F

    # a partial row stands for its records: the batches' input counts them
    return source.observe(INPUT_METRICS, F.sum(F.coalesce(F.col(PARTIAL)["records"], F.lit(1))).alias("records"))


def _checked(source: DataFrame, valid: Column, plan: RunPlan, config: ClientConfig) -> DataFrame:
    """The source with --on-error applied to the records the topology cannot process (`valid`: where it can)."""
    from pyspark.sql import functions as F

    if plan.seed is not None and not plan.seed.per_task:
        valid = F.col(RESTORED) | valid  # a store entry is no input record
    options = plan.options
    return errors_policy.apply(source, valid, options.on_error, config, options.app_id, plan.facts.invalid_reason)


def _batch_writer(sink: KafkaSink, encode: Callable[[DataFrame], DataFrame], plan: RunPlan,
                  reports: dict[int, BatchReport]) -> BatchWriter:
    def report(batch: BatchReport) -> None:
        reports[batch.batch_id] = batch

    writer = sink.batch_writer(encode, report)
    return writer if plan.seed is None else _restoring(writer, report)


def _restoring(write: BatchWriter, on_batch: Callable[[BatchReport], None]) -> BatchWriter:
    """The foreachBatch function of a restore's run: its first batch only puts the stores
    back (its updates restate the changelogs, so nothing is written), then `write` goes on."""
    def first_batch_restores(batch_df: DataFrame, batch_id: int) -> None:
        if batch_id != 0:
            write(batch_df, batch_id)
            return
        batch_df.write.format("noop").mode("overwrite").save()  # runs the batch: the state is kept
        on_batch(BatchReport(batch_id, {}, 0.0, restored=True))
    return first_batch_restores
