"""Operations on the apps found in a state dir: list them, describe one (manifest, checkpoint
progress, group lag, stores and changelog topics), describe a topology."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from kstool.application.model import AppPaths, existing_app, iter_apps, lock_holder, running_pids
from kstool.base.documents import AppDescription, AppRow
from kstool.base.names import validate_name
from kstool.checkpoint.logs import committed_batches, committed_offsets
from kstool.engine import open_app_checkpoint
from kstool.kafka.client import KafkaClients
from kstool.kafka.exceptions import GroupNotFoundError
from kstool.kafka.groups import describe_group


def list_apps(state_dir: Path) -> list[AppRow]:
    rows: list[AppRow] = []
    for paths, manifest in iter_apps(state_dir):
        batch, _ = committed_offsets(open_app_checkpoint(paths, manifest))
        rows.append({"app_id": manifest.app_id, "topology": manifest.topology,
                     "input_topics": manifest.input_topics, "output_topics": manifest.output_topics,
                     "last_batch": batch, **running_pids(lock_holder(paths))})
    return rows


def describe_app(clients: KafkaClients | None, state_dir: Path, app_id: str) -> AppDescription:
    paths = AppPaths(state_dir, validate_name(app_id))
    manifest = existing_app(paths)
    checkpoint = open_app_checkpoint(paths, manifest)
    batch, offsets = committed_offsets(checkpoint)
    batches = committed_batches(checkpoint)
    stored = manifest.to_dict()
    doc: AppDescription = {
        "app_id": manifest.app_id, "topology": manifest.topology, "parameters": manifest.parameters,
        "input_topics": manifest.input_topics, "output_topics": manifest.output_topics,
        "stores": stored["stores"], "kstool_version": manifest.kstool_version,
        "state_dir": str(paths.root),
        "checkpoint_location": checkpoint.uri,
        **running_pids(lock_holder(paths)),
        "last_committed_batch": batch,
        "processed_offsets": [{"topic": t, "partition": p, "offset": o}
                              for (t, p), o in sorted(offsets.items())],
        "history": {"kept_batches": manifest.history_batches, "first_batch": batches[0] if batches else None,
                    "last_batch": batch, "origin": manifest.origin},
        "group": None,
        "missing_input_topics": [],
    }
    if clients is not None:
        existing = clients.metadata().topics
        doc["missing_input_topics"] = [t for t in manifest.input_topics if t not in existing]
        try:
            group = describe_group(clients, app_id)
            doc["group"] = {"state": group["state"], "total_lag": group["total_lag"],
                            "partitions": group["partitions"]}
        except GroupNotFoundError:
            pass
    return doc


def describe_topology(topology, app_id: str, spark_plan: bool = False, debug: bool = False,
                      run_settings: dict | None = None) -> dict:
    """`run_settings`: an app's (its manifest's), whose records set aside are shown as sinks."""
    doc = topology.describe(app_id)
    _add_records_aside(doc, run_settings or {})
    if spark_plan:
        doc["spark_plan"] = _spark_plan(topology, app_id, debug)
    return doc


def _add_records_aside(doc: dict, settings: dict) -> None:
    """Sinks for the records a run sets aside: late records (--late-topic) from the processors
    with stores that drop them, records that cannot be processed (--on-error dlq:TOPIC) from the
    sources that read them."""
    aside = [("LATE-RECORDS-SINK", settings.get("late_topic"), lambda node: bool(node.get("stores"))),
             ("DEAD-LETTER-SINK", str(settings.get("on_error", "")).removeprefix("dlq:")
              if str(settings.get("on_error", "")).startswith("dlq:") else None, lambda node: node["type"] == "source")]
    for sub in doc["sub_topologies"]:
        for name, topic, sends in aside:
            senders = [node for node in sub["nodes"] if sends(node)]
            if topic and senders:
                for node in senders:
                    node.setdefault("successors", []).append(name)
                sub["nodes"].append({"name": name, "type": "sink", "topic": topic})


def _spark_plan(topology, app_id: str, debug: bool) -> str:
    from kstool.engine import CLIENT_CONFIG_FILE_OPTION, SOURCE_NAME, SparkOptions, build_session

    spark, owned = build_session(SparkOptions(master="local[1]", debug=debug), "kstool-describe")
    try:
        source = (spark.readStream.format(SOURCE_NAME)
                  .option(CLIENT_CONFIG_FILE_OPTION, "unused: describing does not read")
                  .option("topics", ",".join(topology.input_topics())).option("group", app_id).load())
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            topology.build(source.filter(topology.valid_record())).explain(mode="formatted")
        return buffer.getvalue().strip()
    finally:
        if owned:
            spark.stop()
