"""Reads a Spark streaming checkpoint's logs without starting Spark (for local checkpoints):
which batches are committed and the source offsets each batch ended at."""

from __future__ import annotations

import json

from kstool.application.location import CheckpointFiles

# a position no Kafka topic has: set by a restore's first batch, which reads no input (the
# source moves it so that Spark runs that batch; kstool.engine.source)
FIRST_BATCH_MARKER = ("__kstool_first_batch", 0)


def committed_batches(checkpoint: CheckpointFiles) -> list[int]:
    return sorted(int(name) for name in checkpoint.names("commits") if name.isdigit())


def last_committed_batch(checkpoint: CheckpointFiles) -> int | None:
    batches = committed_batches(checkpoint)
    return batches[-1] if batches else None


def batch_end_offsets(checkpoint: CheckpointFiles, batch_id: int) -> dict[tuple[str, int], int]:
    """The end offsets of one batch: offsets/<id> is 'v1', the batch metadata, then one JSON
    line per source."""
    lines = checkpoint.read_text(f"offsets/{batch_id}").splitlines()
    out: dict[tuple[str, int], int] = {}
    for line in lines[2:]:
        if line.strip() and line.strip() != "-":
            for topic, parts in json.loads(line).items():
                for partition, offset in parts.items():
                    if topic != FIRST_BATCH_MARKER[0]:
                        out[(topic, int(partition))] = offset
    return out


def committed_offsets(checkpoint: CheckpointFiles) -> tuple[int | None, dict[tuple[str, int], int]]:
    batch = last_committed_batch(checkpoint)
    if batch is None:
        return None, {}
    return batch, batch_end_offsets(checkpoint, batch)


def shuffle_partitions(checkpoint: CheckpointFiles, batch_id: int) -> int | None:
    """The state partitions of a query: Spark keeps its shuffle partition count in each batch's
    offsets (line 2, the batch metadata)."""
    lines = checkpoint.read_text(f"offsets/{batch_id}").splitlines()
    conf = json.loads(lines[1]).get("conf", {}) if len(lines) > 1 else {}
    count = conf.get("spark.sql.shuffle.partitions")
    return int(count) if count else None


def missing_state(checkpoint: CheckpointFiles) -> list[str]:
    """The state files the last committed batch needs and the checkpoint lacks. Batch b leaves
    each state partition's store at version b + 1; RocksDB with changelog checkpointing loads
    a version from its latest snapshot at or below it (`<v>.zip`, none: empty) and every
    `<v>.changelog` after that."""
    batch = last_committed_batch(checkpoint)
    if batch is None:
        return []
    partitions = shuffle_partitions(checkpoint, batch) or 0
    missing = []
    for operator in [n for n in checkpoint.names("state") if n.isdigit()] or ["0"]:
        for partition in range(partitions):
            folder = f"state/{operator}/{partition}"
            names = set(checkpoint.names(folder))
            version = batch + 1
            while version > 0 and f"{version}.zip" not in names:
                if f"{version}.changelog" not in names:
                    missing.append(f"{folder}/{version}.changelog")
                version -= 1
    return missing
