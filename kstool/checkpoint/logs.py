"""Reads a Spark streaming checkpoint's logs without starting Spark (for local checkpoints):
which batches are committed and the source offsets each batch ended at."""

from __future__ import annotations

import json
import re

from kstool.checkpoint.location import CheckpointFiles

# a position no Kafka topic has: set by a restore's first batch, which reads no input (the
# source moves it so that Spark runs that batch; kstool.engine.io.source)
FIRST_BATCH_MARKER = ("__kstool_first_batch", 0)


def _batch_ids(checkpoint: CheckpointFiles, log: str) -> list[int]:
    """The batches a log folder ("offsets": planned, "commits": done) has a file for, in order."""
    return sorted(int(name) for name in checkpoint.names(log) if name.isdigit())


def committed_batches(checkpoint: CheckpointFiles) -> list[int]:
    return _batch_ids(checkpoint, "commits")


def last_committed_batch(checkpoint: CheckpointFiles) -> int | None:
    return _last_batch(checkpoint, "commits")


def uncommitted_batch(checkpoint: CheckpointFiles) -> int | None:
    """The last batch Spark wrote offsets for when it has not committed it (running, or
    stopped or killed inside it: the next run does it again), else None."""
    planned = _last_batch(checkpoint, "offsets")
    return planned if planned is not None and planned != last_committed_batch(checkpoint) else None


def _last_batch(checkpoint: CheckpointFiles, log: str) -> int | None:
    batches = _batch_ids(checkpoint, log)
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


def batch_time_ms(checkpoint: CheckpointFiles, batch_id: int) -> int | None:
    """When Spark planned the batch (its metadata's batchTimestampMs)."""
    lines = checkpoint.read_text(f"offsets/{batch_id}").splitlines()
    stamp = json.loads(lines[1]).get("batchTimestampMs") if len(lines) > 1 else None
    return int(stamp) if stamp is not None else None


def missing_state(checkpoint: CheckpointFiles, batch: int | None = None) -> list[str]:
    """The state files a committed batch (default: the last) needs and the checkpoint lacks.
    Batch b leaves each state partition's store at version b + 1; RocksDB with changelog
    checkpointing loads a version from its latest snapshot at or below it (`<v>.zip`, none:
    empty) and every `<v>.changelog` after that."""
    batch = last_committed_batch(checkpoint) if batch is None else batch
    if batch is None:
        return []
    partitions = shuffle_partitions(checkpoint, batch) or 0
    missing = []
    for operator in _operators(checkpoint):
        for partition in range(partitions):
            folder = f"state/{operator}/{partition}"
            names = set(checkpoint.names(folder))
            version = batch + 1
            while version > 0 and f"{version}.zip" not in names:
                if f"{version}.changelog" not in names:
                    missing.append(f"{folder}/{version}.changelog")
                version -= 1
    return missing


def _operators(checkpoint: CheckpointFiles) -> list[str]:
    return [n for n in checkpoint.names("state") if n.isdigit()] or ["0"]


_VERSION_FILE = re.compile(r"\.?(\d+)\.(changelog|zip)(\.crc)?")
_LOG_FILE = re.compile(r"\.?(\d+)(\.crc)?")


def rollback_files(checkpoint: CheckpointFiles, batch: int) -> list[str]:
    """The files to delete, in this order, so that the checkpoint's last batch is `batch` (-1:
    none) and its state that batch's: newest batch first, each batch's commit, then the state
    versions it wrote, then its offsets. Stopped anywhere, what is left is a checkpoint Spark
    goes on from (a batch without its commit is run again, as after a crash), and no later
    snapshot is left for a later version to load from."""
    by_batch: dict[int, list[str]] = {}
    for folder in ("commits", "offsets"):
        for name in checkpoint.names(folder):
            match = _LOG_FILE.fullmatch(name)
            if match and int(match.group(1)) > batch:
                by_batch.setdefault(int(match.group(1)), []).append(f"{folder}/{name}")
    for operator in _operators(checkpoint):
        for partition in checkpoint.names(f"state/{operator}"):
            folder = f"state/{operator}/{partition}"
            if not partition.isdigit():
                continue
            for name in checkpoint.names(folder):
                match = _VERSION_FILE.fullmatch(name)
                if match and int(match.group(1)) > batch + 1:  # version v is batch v - 1's
                    by_batch.setdefault(int(match.group(1)) - 1, []).append(f"{folder}/{name}")
    order = {"commits": 0, "state": 1, "offsets": 2}
    return [name for b in sorted(by_batch, reverse=True)
            for name in sorted(by_batch[b], key=lambda n: (order[n.split("/")[0]], n))]
