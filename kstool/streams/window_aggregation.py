"""What time-window, sliding-window and session aggregation share: the window, the aggregate,
grace, the emit mode, the store layout (kstool.streams.time_windows, .sliding, .sessions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from kstool.contract import OUTPUT, changelog_role
from kstool.streams.accumulators import TEXT_AGGREGATIONS, Acc, Accumulator, TextAccumulator, output_value
from kstool.streams.indexes import MIN_BUCKET_MS
from kstool.streams.task import Record, StoreValue
from kstool.streams.windows import WindowSpec

if TYPE_CHECKING:  # numpy where batches are processed, not where a topology is only named
    import numpy as np

STORE = "aggregate"
INDEX = f"{STORE}-index"  # window ends; sessions by key and by end (kstool.streams.indexes)
ENDS, BY_KEY = b"E", b"K"  # their prefixes in the index store


@dataclass
class WindowAggregation:
    """What time-window and session aggregation share: the window (for sessions, its size is the
    inactivity gap), the aggregate, grace, the emit mode and the store layout."""
    window: WindowSpec
    agg: str
    grace: int
    emit: str  # update | final
    value_format: str = "auto"
    key_format: str = "windowed"  # | json
    index_bucket_ms: int = MIN_BUCKET_MS
    stores: tuple[str, ...] = (STORE,)
    indexes: tuple[str, ...] = (INDEX,)
    separator: str = ","  # --agg concat

    # numbers (Accumulator) or texts (TextAccumulator), the store's value and the output's
    @property
    def text(self) -> bool:
        return self.agg in TEXT_AGGREGATIONS

    def new_acc(self) -> Acc:
        return TextAccumulator(None if self.agg == "latest" else self.separator.encode()) if self.text else Accumulator()

    def acc_of(self, entry: StoreValue | None) -> Acc:
        """A store entry's live accumulator (decoded once per batch, then kept in it)."""
        if not self.text:
            if entry is not None and entry.aux == "":  # a count's entry: its value is the count
                entry.aux = self.restored_acc(cast(bytes, entry.value))
            return Accumulator.of(entry)
        if entry is None:
            return self.new_acc()
        if not isinstance(entry.aux, TextAccumulator):
            entry.aux = self.new_acc()
            entry.aux.text = entry.value
        return cast(TextAccumulator, entry.aux)

    def restored_acc(self, stored: bytes) -> Acc:
        if not self.text:
            return Accumulator.restored(self.agg, stored, self.value_format)
        acc = cast(TextAccumulator, self.new_acc())
        acc.text = stored
        return acc

    def input_of(self, record: Record) -> Any:
        return record.value if self.text else record.number

    def stored(self, acc: Acc) -> bytes:
        if isinstance(acc, TextAccumulator):
            return cast(bytes, acc.text)
        return self.output(acc)

    def output(self, acc: Acc) -> bytes:
        if isinstance(acc, TextAccumulator):
            return cast(bytes, acc.text)
        return output_value(self.agg, acc.result(self.agg), acc.whole, self.value_format)

    @property
    def retention(self) -> int:
        """How long the store keeps a window: Kafka Streams' default, size + grace (sessions: gap + grace)."""
        return self.window.size + self.grace

    @property
    def cached_roles(self) -> frozenset[str]:
        """The store is a cached store (Kafka Streams' default): per batch its changelog, and with
        --emit update the output, get each window's latest value only."""
        return frozenset({changelog_role(STORE)} | ({OUTPUT} if self.emit == "update" else set()))


def timestamps(records: list[Record]) -> np.ndarray:
    import numpy as np

    return np.fromiter((r.timestamp for r in records), np.int64, len(records))
