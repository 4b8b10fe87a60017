"""State from the app's Spark checkpoint, through Spark's state data source (batch read)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kstool.application.model import StoreSpec
from kstool.changelog.layouts import KeySpec, key_decoder, value_decoder
from kstool.checkpoint.location import CheckpointFiles
from kstool.checkpoint.logs import committed_batches
from kstool.engine import SparkOptions
from kstool.state.backend import Change, Entry, key_order
from kstool.state.exceptions import StateReadError
from kstool.tasks.shards import decode_shard

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class CheckpointBackend:
    def __init__(self, app_id: str, checkpoint: CheckpointFiles, store: StoreSpec, spark_options: SparkOptions,
                 batch_id: int | None = None, sharded: bool = True):
        batches = committed_batches(checkpoint)
        if not batches:
            raise StateReadError(f"app {app_id!r} has no committed batch in {checkpoint.uri}")
        if batch_id is not None:
            self._require_committed(batch_id, batches, app_id)
        self.app_id, self.batches = app_id, batches
        self.checkpoint, self.store, self.spark_options = checkpoint, store, spark_options
        # a per-task store's entries in shards (kstool.tasks.shards), or an entry per key
        self.sharded = sharded and bool(store.spark_state_var)
        self.batch_id = batches[-1] if batch_id is None else batch_id
        self._spark: SparkSession | None = None

    @staticmethod
    def _require_committed(batch_id: int, batches: list[int], app_id: str) -> None:
        if batch_id not in batches:
            raise StateReadError(f"batch {batch_id} is not a committed batch of {app_id!r} "
                                 f"(committed: {batches[0]}..{batches[-1]})")

    def _session(self):
        if self._spark is None:
            from kstool.engine import build_session

            self._spark, _ = build_session(self.spark_options, "kstool-state")
        return self._spark

    def _reader(self):
        reader = (self._session().read.format("statestore")
                  .option("operatorId", self.store.operator_id)
                  .option("storeName", self.store.spark_store))
        if self.store.spark_state_var:
            reader = reader.option("stateVarName", self.store.spark_state_var)
        return reader

    def _fields(self, frame) -> tuple[str, str]:
        if self.sharded:
            return "user_map_key.shard", "user_map_value.entries"
        if self.store.spark_state_var:  # a map from changelog key bytes to value bytes
            return "user_map_key.key", "user_map_value.value"
        keys, values = (frame.schema[part].dataType.fieldNames() for part in ("key", "value"))
        # a field the state does not have: a checkpoint that a newer kstool wrote (e.g. a restore's)
        key = self.store.spark_key_field if self.store.spark_key_field in keys else keys[0]
        value = self.store.spark_value_field if self.store.spark_value_field in values else values[0]
        return f"key.{key}", f"value.{value}"

    def _decoded(self, keys: list, values: list) -> tuple[list, list, list, list]:
        """Map-state stores hold changelog bytes: decode them with the store's layout."""
        if not self.store.spark_state_var:
            return keys, values, [None] * len(keys), [None] * len(keys)
        decode_key = key_decoder(KeySpec(self.store.kind, self.store.key_format))
        decode_value = value_decoder(self.store.value_format)
        decoded = [decode_key(k) for k in keys]
        size = self.store.window_size_ms
        ends = [d.window_end if d.window_end is not None or size is None or d.window_start is None
                else d.window_start + size for d in decoded]
        return ([d.key for d in decoded], [decode_value(v)[0] for v in values],
                [d.window_start for d in decoded], ends)

    def _rows(self, frame) -> list[Entry]:
        from pyspark.sql import functions as F

        key, value = self._fields(frame)
        table = frame.select(F.col(key).alias("k"), F.col(value).alias("v"),
                             F.col("partition_id")).toArrow()
        raw_keys, raw_values, partitions = (table.column(c).to_pylist() for c in ("k", "v", "partition_id"))
        if self.sharded:
            raw_keys, raw_values, partitions = _unsharded(raw_values, partitions)
        keys, values, starts, ends = self._decoded(raw_keys, raw_values)
        rows = zip(keys, values, starts, ends, partitions)
        return sorted((Entry(*row) for row in rows), key=lambda e: (key_order(e.key), e.window_start or 0))

    def _state(self):
        return self._reader().option("batchId", self.batch_id).load(self.checkpoint.uri)

    def entries(self) -> list[Entry]:
        return self._rows(self._state())

    def lookup(self, keys: list[Any]) -> list[Entry]:
        from pyspark.sql import functions as F

        if self.store.spark_state_var:  # keys are inside the layout's bytes: decode, then pick
            wanted = set(keys)
            return [e for e in self.entries() if e.key in wanted]
        state = self._state()
        return self._rows(state.filter(F.col(self._fields(state)[0]).isin(keys)))

    def changes(self, from_batch: int, to_batch: int | None) -> list[Change]:
        from pyspark.sql import functions as F

        to_batch = self.batch_id if to_batch is None else to_batch
        for batch_id in (from_batch, to_batch):  # Spark's own errors for these are raw and unclear
            self._require_committed(batch_id, self.batches, self.app_id)
        if self.sharded:
            return self._sharded_changes(from_batch, to_batch)
        reader = (self._reader().option("readChangeFeed", "true")
                  .option("changeStartBatchId", from_batch)
                  .option("changeEndBatchId", to_batch))
        feed = reader.load(self.checkpoint.uri)
        key, value = self._fields(feed)
        table = feed.select("batch_id", "change_type", F.col(key).alias("k"), F.col(value).alias("v"),
                            "partition_id").toArrow()
        keys, values, starts, ends = self._decoded(table.column("k").to_pylist(), table.column("v").to_pylist())
        columns = [table.column(c).to_pylist() for c in ("batch_id", "change_type")]
        rows = zip(*columns, keys, values, table.column("partition_id").to_pylist(), starts, ends)
        return sorted((Change(*row) for row in rows),
                      key=lambda c: (c.batch_id, key_order(c.key), c.window_start or 0))


    def _sharded_changes(self, from_batch: int, to_batch: int) -> list[Change]:
        """A shard is rewritten whole, so a batch's changes are what its shards hold against what
        they held before it; an entry that moved to a new shard (a split) did not change."""
        from pyspark.sql import functions as F

        held: dict[tuple[int, bytes], dict[bytes, bytes | None]] = {}  # (partition, shard) -> entries
        if from_batch > 0:
            try:
                before = self._reader().option("batchId", from_batch - 1).load(self.checkpoint.uri)
                rows = before.select("partition_id", "user_map_key.shard", "user_map_value.entries").collect()
            except Exception as failure:
                raise StateReadError(f"changes from batch {from_batch} need the state of batch {from_batch - 1}, "
                                     f"which {self.checkpoint.uri} does not keep: {str(failure).splitlines()[0]}") from None
            held = {(p, shard): dict(_pairs(blob)) for p, shard, blob in rows}
        feed = (self._reader().option("readChangeFeed", "true").option("changeStartBatchId", from_batch)
                .option("changeEndBatchId", to_batch).load(self.checkpoint.uri)
                .select("batch_id", "change_type", "partition_id", F.col("user_map_key.shard").alias("shard"),
                        F.col("user_map_value.entries").alias("blob")).toArrow().to_pylist())
        by_batch: dict[int, list[dict]] = {}
        for row in feed:
            by_batch.setdefault(row["batch_id"], []).append(row)
        out: list[tuple[int, str, bytes, bytes | None, int]] = []
        for batch, rows_of_batch in sorted(by_batch.items()):
            removed: dict[tuple[int, bytes], bytes | None] = {}
            added: dict[tuple[int, bytes], bytes | None] = {}
            for row in rows_of_batch:
                slot = (row["partition_id"], row["shard"])
                old = held.pop(slot, {})
                new = dict(_pairs(row["blob"])) if row["change_type"] == "update" and row["blob"] else {}
                held[slot] = new
                removed.update(((slot[0], k), v) for k, v in old.items() if k not in new)
                added.update(((slot[0], k), v) for k, v in new.items() if k not in old or old[k] != v)
            moved = {slot for slot, value in added.items() if slot in removed and removed[slot] == value}
            out += [(batch, "update", k, v, p) for (p, k), v in added.items() if (p, k) not in moved]
            out += [(batch, "delete", k, None, p) for (p, k) in removed if (p, k) not in added]
        keys, values, starts, ends = self._decoded([row[2] for row in out], [row[3] for row in out])
        changes = [Change(batch, kind, key, value, partition, start, end) for (batch, kind, _, _, partition), key,
                   value, start, end in zip(out, keys, values, starts, ends)]
        return sorted(changes, key=lambda c: (c.batch_id, key_order(c.key), c.window_start or 0))


def _pairs(blob: bytes) -> list[tuple[bytes, bytes | None]]:
    return [(key, value) for key, value, _, _ in decode_shard(blob)]


def _unsharded(blobs: list, partitions: list) -> tuple[list, list, list]:
    """The store entries of shard rows: (store keys, values, partitions)."""
    keys, values, parts = [], [], []
    for blob, partition in zip(blobs, partitions):
        for key, value in _pairs(blob):
            if value is None:  # a versioned table's key whose latest version is a tombstone
                continue
            keys.append(key)
            values.append(value)
            parts.append(partition)
    return keys, values, parts
