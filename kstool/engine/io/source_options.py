"""What the run side tells the Kafka source (kstool.engine.io.source) and the offsets it answers
in: option names, the client configuration's private file, offsets nested as Spark stores them,
an input's ends. No pyspark: the run side, parking and a restore's seed import these alone."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from kstool.base.home import write_private_text
from kstool.config import ClientConfig
from kstool.kafka.client import KafkaClients

SOURCE_NAME = "kstool_kafka"
# The client configuration may hold secrets (SASL passwords): it travels to the executors as
# the path of a private file, never as an option value that plans and debug logs would show.
CLIENT_CONFIG_FILE_OPTION = "client_config_file"
# Input values with a schema: their format and schema source (kstool.schemas.formats.SchemaOptions
# as JSON, without the registry's settings, which travel in the client configuration)
VALUE_SCHEMA_OPTION = "value_schema"
# A query the warm engine keeps between runs (kstool.engine.query.parking) reads up to the offsets this
# file names, and nothing while it is absent
GATE_FILE_OPTION = "gate_file"
# A topology's combiner (kstool.contract.CombinerSpec as JSON): the rows of one key in a range
# leave the reader as one partial row
COMBINER_OPTION = "combiner"
# Changelog topics whose compacted views a restore puts back in the stores (comma-separated)
SEED_TOPICS_OPTION = "seed_topics"
HISTORY_TOPICS_OPTION = "history_topics"  # of the seed topics: read whole (versioned stores' changelogs)

Offsets = dict[str, dict[str, int]]


def write_client_config(config: ClientConfig, path: Path) -> Path:
    """Write the config for this run's executors (mode 0600; the caller deletes it)."""
    write_private_text(path, json.dumps(asdict(config)))
    return path


def read_client_config(path: str) -> ClientConfig:
    with open(path, encoding="utf-8") as f:
        return ClientConfig(**json.load(f))


def flatten_offsets(offsets: Offsets) -> dict[tuple[str, int], int]:
    return {(t, int(p)): o for t, parts in offsets.items() for p, o in parts.items()}


def nest_offsets(flat: dict[tuple[str, int], int]) -> Offsets:
    """{(topic, partition): offset} as the source's offset options take it: {topic: {"partition": offset}}."""
    out: Offsets = {}
    for (t, p), o in sorted(flat.items()):
        out.setdefault(t, {})[str(p)] = o
    return out


def partitions_of(clients: KafkaClients, topics: list[str]) -> list[tuple[str, int]]:
    found = clients.require_topics(topics)
    return [(t, p) for t in topics for p in found[t]]


def input_ends(clients: KafkaClients, topics: list[str]) -> dict[tuple[str, int], int]:
    """Each input partition's true end now: what a --once run reads up to."""
    return {tp: high for tp, (_, high) in clients.watermarks(partitions_of(clients, topics)).items()}
