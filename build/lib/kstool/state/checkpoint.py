"""State from the app's Spark checkpoint, through Spark's state data source (batch read)."""

from __future__ import annotations

from typing import Any

from kstool.engine.app import AppPaths, StoreSpec
from kstool.engine.checkpoint import committed_batches
from kstool.engine.session import SparkOptions
from kstool.state.backend import Change, Entry
from kstool.state.exceptions import StateReadError


class CheckpointBackend:
    def __init__(self, paths: AppPaths, store: StoreSpec, spark_options: SparkOptions,
                 batch_id: int | None = None):
        batches = committed_batches(paths.checkpoint)
        if not batches:
            raise StateReadError(f"app {paths.app_id!r} has no committed batch in {paths.checkpoint}")
        if batch_id is not None and batch_id not in batches:
            raise StateReadError(f"batch {batch_id} is not a committed batch of {paths.app_id!r} "
                                 f"(committed: {batches[0]}..{batches[-1]})")
        self.paths, self.store, self.spark_options = paths, store, spark_options
        self.batch_id = batches[-1] if batch_id is None else batch_id
        self.description = f"checkpoint {paths.checkpoint} at batch {self.batch_id}"
        self._spark = None

    def _session(self):
        if self._spark is None:
            from kstool.engine.session import build_session

            self._spark, _ = build_session(self.spark_options, "kstool-state")
        return self._spark

    def _reader(self):
        return (self._session().read.format("statestore")
                .option("operatorId", self.store.operator_id)
                .option("storeName", self.store.spark_store))

    def _fields(self, frame) -> tuple[str, str]:
        key = self.store.spark_key_field or frame.schema["key"].dataType.fieldNames()[0]
        value = self.store.spark_value_field or frame.schema["value"].dataType.fieldNames()[0]
        return f"key.{key}", f"value.{value}"

    def _rows(self, frame) -> list[Entry]:
        from pyspark.sql import functions as F

        key, value = self._fields(frame)
        table = frame.select(F.col(key).alias("k"), F.col(value).alias("v"),
                             F.col("partition_id")).toArrow()
        rows = zip(table.column("k").to_pylist(), table.column("v").to_pylist(),
                   table.column("partition_id").to_pylist())
        return sorted((Entry(k, v, partition=p) for k, v, p in rows), key=lambda e: _sort_key(e.key))

    def _state(self):
        return self._reader().option("batchId", self.batch_id).load(str(self.paths.checkpoint))

    def entries(self) -> list[Entry]:
        return self._rows(self._state())

    def lookup(self, keys: list[Any]) -> list[Entry]:
        from pyspark.sql import functions as F

        state = self._state()
        return self._rows(state.filter(F.col(self._fields(state)[0]).isin(keys)))

    def changes(self, from_batch: int, to_batch: int | None) -> list[Change]:
        from pyspark.sql import functions as F

        reader = (self._reader().option("readChangeFeed", "true")
                  .option("changeStartBatchId", from_batch)
                  .option("changeEndBatchId", self.batch_id if to_batch is None else to_batch))
        feed = reader.load(str(self.paths.checkpoint))
        key, value = self._fields(feed)
        table = feed.select("batch_id", "change_type", F.col(key).alias("k"), F.col(value).alias("v"),
                            "partition_id").toArrow()
        columns = [table.column(c).to_pylist() for c in ("batch_id", "change_type", "k", "v", "partition_id")]
        return sorted((Change(*row) for row in zip(*columns)), key=lambda c: (c.batch_id, _sort_key(c.key)))


def _sort_key(key: Any):
    return (str(type(key)), key if key is not None else "")
