"""Reads a Spark streaming checkpoint's logs without starting Spark: which batches are
committed and the source offsets each batch ended at."""

from __future__ import annotations

import json
from pathlib import Path


def _batch_ids(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def committed_batches(checkpoint: Path) -> list[int]:
    return _batch_ids(checkpoint / "commits")


def last_committed_batch(checkpoint: Path) -> int | None:
    batches = committed_batches(checkpoint)
    return batches[-1] if batches else None


def batch_end_offsets(checkpoint: Path, batch_id: int) -> dict[tuple[str, int], int]:
    """The end offsets of one batch: offsets/<id> is 'v1', the batch metadata, then one JSON
    line per source."""
    lines = (checkpoint / "offsets" / str(batch_id)).read_text(encoding="utf-8").splitlines()
    out: dict[tuple[str, int], int] = {}
    for line in lines[2:]:
        if line.strip() and line.strip() != "-":
            for topic, parts in json.loads(line).items():
                for partition, offset in parts.items():
                    out[(topic, int(partition))] = offset
    return out


def committed_offsets(checkpoint: Path) -> tuple[int | None, dict[tuple[str, int], int]]:
    batch = last_committed_batch(checkpoint)
    if batch is None:
        return None, {}
    return batch, batch_end_offsets(checkpoint, batch)
