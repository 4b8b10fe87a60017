"""State rebuilt from the store's changelog topic: the compacted view, no Spark needed (works
for Kafka Streams apps too, given the formats)."""

from __future__ import annotations

import json
from typing import Any, cast

from kstool.changelog.operations import DecodeStats, DumpOptions, Formats, dump
from kstool.kafka.client import KafkaClients
from kstool.kafka.topics import topic_configs
from kstool.state.backend import Change, Entry, key_order
from kstool.state.exceptions import UnsupportedQueryError
from kstool.streams.versioned_table import latest_versions

# what Kafka Streams adds to a window, session or versioned store's time in its changelog's config
# (StreamsConfig windowstore.changelog.additional.retention.ms, default one day)
CHANGELOG_EXTRA_RETENTION_MS = 86_400_000


def store_times(clients: KafkaClients, topic: str) -> tuple[int | None, int | None]:
    """A Kafka Streams store's (retention, history), read from its changelog topic's config: a
    window or session changelog is `compact,delete` with retention.ms = the store's retention plus
    the extra day; a versioned store's is compacted with min.compaction.lag.ms = its history
    retention plus the extra day (VersionedChangelogTopicConfig), a setting no other changelog has."""
    config = topic_configs(clients, topic)
    policy = set(config.get("cleanup.policy", "").split(","))
    retention, lag = int(config.get("retention.ms", "-1")), int(config.get("min.compaction.lag.ms", "0"))
    windowed = "delete" in policy and retention > CHANGELOG_EXTRA_RETENTION_MS
    versioned = policy == {"compact"} and lag > CHANGELOG_EXTRA_RETENTION_MS
    return (retention - CHANGELOG_EXTRA_RETENTION_MS if windowed else None,
            lag - CHANGELOG_EXTRA_RETENTION_MS if versioned else None)


class ChangelogBackend:
    def __init__(self, clients: KafkaClients, topic: str, formats: Formats, window_size_ms: int | None = None,
                 history_ms: int | None = None, retention_ms: int | None = None):
        self.clients, self.topic, self.formats = clients, topic, formats
        self.window_size_ms = window_size_ms  # window store keys hold only the start
        self.history_ms = history_ms  # a versioned table's: each key's latest version is its newest by time
        self.retention_ms = retention_ms  # a window or session store's: older windows are gone
        self.warnings: list[str] = []  # what the reads could not know, for the command to say
        self._entries: list[Entry] | None = None
        self.expired: list[Entry] = []  # windows the changelog holds past the retention: the store's are gone

    def entries(self) -> list[Entry]:
        if self._entries is None:
            if self.history_ms is not None:
                every = dump(self.clients, DumpOptions(self.topic, self.formats), DecodeStats())
                rows = _latest_versions(every, self.history_ms)
            elif self.retention_ms is not None:
                rows = self._retained(dump(self.clients, DumpOptions(self.topic, self.formats, compact=True,
                                                                     show_tombstones=True), DecodeStats()))
            else:
                rows = list(dump(self.clients, DumpOptions(self.topic, self.formats, compact=True), DecodeStats()))
            self._entries = self._as_entries(rows)
        return self._entries

    def _as_entries(self, rows) -> list[Entry]:
        return sorted((Entry(r["key"], r["value"], r["window_start"], self._end(r), r["partition"]) for r in rows),
                      key=lambda e: (*key_order(e.key), e.window_start or 0))

    def _retained(self, rows) -> list[dict]:
        """The windows a Kafka Streams store still returns: its segmented store answers only for
        windows (sessions: by their end) newer than the newest it was given less the retention
        (AbstractRocksDBSegmentedBytesStore.getActualFrom), per partition. The older ones are
        kept as `expired`."""
        every = [row for row in rows if not row["tombstone"]]
        by_session_end = self.formats.key.layout == "session"
        newest: dict[int, int] = {}
        for row in every:
            at = row["window_end"] if by_session_end else row["window_start"]
            newest[row["partition"]] = max(newest.get(row["partition"], at), at)
        retention = cast(int, self.retention_ms)
        kept: list[dict] = []
        expired: list[dict] = []
        for row in every:
            retained = (row["window_end"] if by_session_end else row["window_start"]) > newest[row["partition"]] - retention
            (kept if retained else expired).append(row)
        self.expired = self._as_entries(expired)
        return kept

    def _end(self, row: dict) -> int | None:
        if row["window_end"] is None and row["window_start"] is not None and self.window_size_ms:
            return row["window_start"] + self.window_size_ms
        return row["window_end"]

    def lookup(self, keys: list[Any]) -> list[Entry]:
        wanted = set(map(_comparable, keys))
        return [e for e in self.entries() if _comparable(e.key) in wanted]

    def changes(self, from_batch: int, to_batch: int | None) -> list[Change]:
        raise UnsupportedQueryError("the change feed by batch needs the app's checkpoint "
                                    "(drop --from-changelog)")


def _latest_versions(rows, history_ms: int) -> list[dict]:
    """A versioned table's entries, as its get(key) answers: per partition, each key's latest
    version by time (kstool.streams.versioned_table)."""
    by_partition: dict[int, list[dict]] = {}
    for row in rows:
        by_partition.setdefault(row["partition"], []).append(row)
    return [held[number] for held in by_partition.values()
            for number in latest_versions(history_ms, ((r.pop("_raw_key"), r["tombstone"], r["timestamp"])
                                                       for r in held)).values()]


def _comparable(key: Any) -> str:
    """Keys as text to match them: records (avro, json) as canonical JSON, whatever the order
    their fields were typed in."""
    return json.dumps(key, sort_keys=True, separators=(",", ":")) if isinstance(key, (dict, list)) else str(key)
