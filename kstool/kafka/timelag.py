"""Lag in time: how long the oldest record a group has not processed has waited. Per partition,
now minus the timestamp of the first record at or after the group's committed offset; a
partition the group has caught up with has none (0). Records lag tells how much is waiting,
this tells for how long, which is what an alert on a stream app wants."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kstool.kafka.ends import read_until_answered

if TYPE_CHECKING:
    from kstool.kafka.client import KafkaClients

TP = tuple[str, int]


def first_timestamps(clients: "KafkaClients", positions: dict[TP, int]) -> dict[TP, int]:
    """Per partition, the timestamp (epoch ms) of the first record at or after its position;
    partitions with none (at their end, or no answer in time) are left out."""
    found: dict[TP, int] = {}

    def answered(tp: TP, msg: Any, consumer: Any) -> bool:
        if msg.error() is None:
            found[tp] = msg.timestamp()[1]
        return True  # a record, or the partition's end

    read_until_answered(clients, positions, answered)
    return found


def time_lags_ms(clients: "KafkaClients", committed: dict[TP, int], ends: dict[TP, int],
                 now_ms: int | None = None) -> dict[TP, int | None]:
    """Per partition: 0 when caught up, else the age of the oldest unprocessed record in ms
    (None when it could not be read in time)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    behind = {tp: offset for tp, offset in committed.items() if offset < ends.get(tp, 0)}
    stamps = first_timestamps(clients, behind)
    return {tp: (max(now_ms - stamps[tp], 0) if tp in stamps else None) if tp in behind else 0
            for tp in committed}
