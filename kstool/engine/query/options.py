"""What a run is asked to do, and what it reports when it ends (`--report json`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kstool.contract import DEFAULT_CACHE_MAX_BYTES
from kstool.engine.io.errors_policy import ErrorPolicy
from kstool.engine.spark.session import SparkOptions
from kstool.kafka.topics import BROKER_DEFAULT
from kstool.schemas.formats import SchemaOptions

STARTING = ("earliest", "latest")  # where a new app starts
GUARANTEES = ("at_least_once", "exactly_once_v2")
ON_DATA_LOSS = ("fail", "earliest")  # input offsets lost to retention: fail, or go on from the log start
# records per micro-batch unless --max-records-per-batch says. A batch whose records the source
# combines crosses into Spark as its partials (a row per key, word or window and range), so it
# takes ten times the records for about the same work downstream where keys repeat (memory
# follows the partials); one batch instead of five over 5M records saved ~3 s (bench/README.md)
BATCH_RECORDS = 1_000_000
COMBINED_BATCH_RECORDS = 10_000_000


@dataclass
class RunOptions:
    app_id: str
    state_dir: Path
    once: bool = False
    trigger_ms: int = 1000
    starting: str = "earliest"
    max_records_per_batch: int | None = None  # None: BATCH_RECORDS or COMBINED_BATCH_RECORDS
    max_records_per_task: int = 500_000
    on_error: ErrorPolicy = field(default_factory=lambda: ErrorPolicy("fail"))
    on_data_loss: str = "fail"
    spark: SparkOptions = field(default_factory=SparkOptions)
    stop_offsets: dict[tuple[str, int], int] = field(default_factory=dict)  # exclusive, per input partition
    processing_guarantee: str = "at_least_once"  # one of GUARANTEES
    late_topic: str | None = None  # where records dropped as late go (per-task topologies)
    checkpoint_location: str | None = None  # a URI (kstool.checkpoint.location); None: as the app has it
    broker_timeout_s: float = 120.0  # how long a run waits out a Kafka outage (kstool.engine.query.outage)
    input_schemas: SchemaOptions | None = None  # where input values with a schema find it
    # topologies with a combiner: the source combines each key's records as it reads them
    # (False: every record crosses into Spark on its own, the path the combined one is checked against)
    combine: bool = True
    history_batches: int | None = None  # batches the checkpoint keeps; None: as the app has it
    # of the topics the run creates (outputs, changelogs, dead letters, late records): Kafka
    # Streams' replication.factor, -1 (its default) being the broker's default.replication.factor
    replication_factor: int = BROKER_DEFAULT
    # the record cache of the tables a topology writes its updates from (Kafka Streams'
    # statestore.cache.max.bytes; topologies with a cache_max_bytes field take it)
    cache_max_bytes: int = DEFAULT_CACHE_MAX_BYTES
    # the command line's run options, kept in the manifest for `reprocess` (run_settings)
    settings: dict[str, Any] = field(default_factory=dict)

    def batch_records(self, combined: bool) -> int:
        """The records a micro-batch may take: as given, else by whether the source combines them."""
        return self.max_records_per_batch or (COMBINED_BATCH_RECORDS if combined else BATCH_RECORDS)


@dataclass
class RunSummary:
    app_id: str
    batches: int = 0
    input_records: int = 0
    written: dict[str, int] = field(default_factory=dict)
    bad_records: int = 0
    late_records: int = 0  # windows: dropped whole; stream-stream joins: too old for their store
    last_batch: int | None = None
    committed: dict[str, int] = field(default_factory=dict)
    spark_start_seconds: float = 0.0
    processing_seconds: float = 0.0
    total_seconds: float = 0.0
    stopped_by_signal: bool = False
    lag: int | None = None  # records left to read after the last batch, as Spark last saw the input

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def where_it_stopped(self) -> str:
        """Where a run cut short left its app, for the one line that says so."""
        batch = "before its first batch" if self.last_batch is None else f"after batch {self.last_batch}"
        left = f" with {self.lag} record(s) left to read" if self.lag else ""
        return f"{self.app_id} stopped {batch}{left}"
