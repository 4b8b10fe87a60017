"""The interface both state backends implement, and the entry they return."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol


def key_order(key: Any) -> tuple[str, Any]:
    """How entries sort by key, the same from the checkpoint and the changelog: numbers as numbers,
    texts as texts, composite keys (a buffer's {time, key, seqnum}, avro records) by their JSON."""
    if key is None or isinstance(key, (bool, int, float, str, bytes)):
        return str(type(key)), "" if key is None else key
    return str(type(key)), json.dumps(key, sort_keys=True, default=str)


@dataclass
class Entry:
    key: Any
    value: Any
    window_start: int | None = None
    window_end: int | None = None
    partition: int | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Change:
    batch_id: int
    change_type: str  # update | delete
    key: Any
    value: Any
    partition: int | None = None
    window_start: int | None = None
    window_end: int | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class StateBackend(Protocol):
    """Read-only, and safe while the app runs: it reads the last committed state."""

    def entries(self) -> list[Entry]:
        """Every entry of the store, sorted by key."""

    def lookup(self, keys: list[Any]) -> list[Entry]:
        """The entries of these keys (missing keys are left out)."""

    def changes(self, from_batch: int, to_batch: int | None) -> list[Change]:
        """The change feed between two committed batches (inclusive)."""
