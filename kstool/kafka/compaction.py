"""Kafka's log compaction, done client-side (the embedded broker compacts nothing, and a real
one may not have cleaned a segment yet): of each key in a partition, only the last record."""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def kept_by_compaction(slots: Sequence[Hashable]) -> list[int]:
    """The indexes, in log order, of the records compaction keeps: the last of each slot, a
    slot being (partition, key) or, within one partition, the key. Whether a kept tombstone is
    shown is the caller's choice."""
    last = {slot: index for index, slot in enumerate(slots)}
    return sorted(last.values())
