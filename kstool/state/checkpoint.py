"""State from the app's Spark checkpoint, through Spark's state data source (batch read)."""

from __future__ import annotations

from typing import Any

from kstool.application.checkpoint import committed_batches
from kstool.application.location import CheckpointFiles
from kstool.application.model import StoreSpec
from kstool.changelog.layouts import KeySpec, key_decoder, value_decoder
from kstool.engine.session import SparkOptions
from kstool.state.backend import Change, Entry
from kstool.state.exceptions import StateReadError


class CheckpointBackend:
    def __init__(self, app_id: str, checkpoint: CheckpointFiles, store: StoreSpec, spark_options: SparkOptions,
                 batch_id: int | None = None):
        batches = committed_batches(checkpoint)
        if not batches:
            raise StateReadError(f"app {app_id!r} has no committed batch in {checkpoint.uri}")
        if batch_id is not None and batch_id not in batches:
            raise StateReadError(f"batch {batch_id} is not a committed batch of {app_id!r} "
                                 f"(committed: {batches[0]}..{batches[-1]})")
        self.checkpoint, self.store, self.spark_options = checkpoint, store, spark_options
        self.batch_id = batches[-1] if batch_id is None else batch_id
        self.description = f"checkpoint {checkpoint.uri} at batch {self.batch_id}"
        self._spark = None

    def _session(self):
        if self._spark is None:
            from kstool.engine.session import build_session

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
        keys, values, starts, ends = self._decoded(table.column("k").to_pylist(), table.column("v").to_pylist())
        rows = zip(keys, values, starts, ends, table.column("partition_id").to_pylist())
        return sorted((Entry(*row) for row in rows), key=lambda e: (_sort_key(e.key), e.window_start or 0))

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

        reader = (self._reader().option("readChangeFeed", "true")
                  .option("changeStartBatchId", from_batch)
                  .option("changeEndBatchId", self.batch_id if to_batch is None else to_batch))
        feed = reader.load(self.checkpoint.uri)
        key, value = self._fields(feed)
        table = feed.select("batch_id", "change_type", F.col(key).alias("k"), F.col(value).alias("v"),
                            "partition_id").toArrow()
        keys, values, starts, ends = self._decoded(table.column("k").to_pylist(), table.column("v").to_pylist())
        columns = [table.column(c).to_pylist() for c in ("batch_id", "change_type")]
        rows = zip(*columns, keys, values, table.column("partition_id").to_pylist(), starts, ends)
        return sorted((Change(*row) for row in rows),
                      key=lambda c: (c.batch_id, _sort_key(c.key), c.window_start or 0))


def _sort_key(key: Any):
    return (str(type(key)), key if key is not None else "")
