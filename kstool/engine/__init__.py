"""The Spark engine: runs any kstool.contract.Topology as a Structured Streaming query; knows no
topology. Its sub-packages, lowest first: io (Kafka I/O inside the query), spark (Spark's
process), query (a run's query planned, built and driven), daemon (the warm engine), hooks (what
the packages above need of the engine bound once); runtime.run_app, the entry, on top
(tests/test_architecture.py pins the order).

This module is the engine's front door: other packages import from `kstool.engine` only the
names below (tests/test_architecture.py forbids the rest). A name's module is imported on its
first use, so that a command that only asks the warm engine's status imports neither pyspark nor
pyarrow."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> its module: the runtime half of the imports under TYPE_CHECKING below
_EXPORTS = {
    # a run: its options, its entry, what it reports
    "RunOptions": "kstool.engine.query.options",
    "RunSummary": "kstool.engine.query.options",
    "BATCH_RECORDS": "kstool.engine.query.options",
    "COMBINED_BATCH_RECORDS": "kstool.engine.query.options",
    "GUARANTEES": "kstool.engine.query.options",
    "ON_DATA_LOSS": "kstool.engine.query.options",
    "STARTING": "kstool.engine.query.options",
    "ErrorPolicy": "kstool.engine.io.errors_policy",
    "run_app": "kstool.engine.runtime",
    "read_seed": "kstool.engine.query.seed",
    "Progress": "kstool.engine.progress",
    "Silent": "kstool.engine.progress",
    "BatchStatus": "kstool.engine.progress",
    "last_stop_signal": "kstool.engine.stopping",
    # where it runs: a Spark session of this process, or the warm engine
    "SparkOptions": "kstool.engine.spark.session",
    "build_session": "kstool.engine.spark.session",
    "SOURCE_NAME": "kstool.engine.io.source_options",
    "CLIENT_CONFIG_FILE_OPTION": "kstool.engine.io.source_options",
    "engine_wanted": "kstool.engine.daemon.client",
    "run_here_or_in_engine": "kstool.engine.daemon.client",
    "open_app_checkpoint": "kstool.engine.hooks",
    "open_checkpoint_at": "kstool.engine.hooks",
    "lock_app": "kstool.engine.hooks",
    "Placement": "kstool.engine.query.placement",
    "HERE": "kstool.engine.query.placement",
    # the warm engine itself
    "start_engine": "kstool.engine.daemon.client",
    "stop_engine": "kstool.engine.daemon.client",
    "engine_status": "kstool.engine.daemon.client",
    "prepare_jvm_archive": "kstool.engine.spark.jvm_recorder",
    "EngineSettings": "kstool.engine.daemon.protocol",
    "DEFAULT_MAX_PARKED": "kstool.engine.daemon.protocol",
    "IDLE_ENV": "kstool.engine.daemon.protocol",
    "checked_heap": "kstool.engine.daemon.protocol",
    "idle_timeout_from_env": "kstool.engine.daemon.protocol",
    "parse_idle_timeout": "kstool.engine.daemon.protocol",
    # the record packs the query hands its tasks (kstool.tasks reads and writes them)
    "HEADERS_TYPE": "kstool.engine.io.packs",
    "PACK_BYTES": "kstool.engine.io.packs",
    "ipc": "kstool.engine.io.packs",
    "pieces": "kstool.engine.io.packs",
    "pack_records": "kstool.engine.io.packs",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # `name as name`: an explicit re-export, for mypy and ruff
    from kstool.engine.daemon.client import (
        engine_status as engine_status,
        engine_wanted as engine_wanted,
        run_here_or_in_engine as run_here_or_in_engine,
        start_engine as start_engine,
        stop_engine as stop_engine,
    )
    from kstool.engine.daemon.protocol import (
        DEFAULT_MAX_PARKED as DEFAULT_MAX_PARKED,
        IDLE_ENV as IDLE_ENV,
        EngineSettings as EngineSettings,
        checked_heap as checked_heap,
        idle_timeout_from_env as idle_timeout_from_env,
        parse_idle_timeout as parse_idle_timeout,
    )
    from kstool.engine.hooks import (
        lock_app as lock_app,
        open_app_checkpoint as open_app_checkpoint,
        open_checkpoint_at as open_checkpoint_at,
    )
    from kstool.engine.io.errors_policy import (
        ErrorPolicy as ErrorPolicy,
    )
    from kstool.engine.io.packs import (
        HEADERS_TYPE as HEADERS_TYPE,
        PACK_BYTES as PACK_BYTES,
        ipc as ipc,
        pack_records as pack_records,
        pieces as pieces,
    )
    from kstool.engine.io.source_options import (
        CLIENT_CONFIG_FILE_OPTION as CLIENT_CONFIG_FILE_OPTION,
        SOURCE_NAME as SOURCE_NAME,
    )
    from kstool.engine.progress import (
        BatchStatus as BatchStatus,
        Progress as Progress,
        Silent as Silent,
    )
    from kstool.engine.query.options import (
        BATCH_RECORDS as BATCH_RECORDS,
        COMBINED_BATCH_RECORDS as COMBINED_BATCH_RECORDS,
        GUARANTEES as GUARANTEES,
        ON_DATA_LOSS as ON_DATA_LOSS,
        STARTING as STARTING,
        RunOptions as RunOptions,
        RunSummary as RunSummary,
    )
    from kstool.engine.query.placement import (
        HERE as HERE,
        Placement as Placement,
    )
    from kstool.engine.query.seed import (
        read_seed as read_seed,
    )
    from kstool.engine.runtime import (
        run_app as run_app,
    )
    from kstool.engine.spark.jvm_recorder import (
        prepare_jvm_archive as prepare_jvm_archive,
    )
    from kstool.engine.spark.session import (
        SparkOptions as SparkOptions,
        build_session as build_session,
    )
    from kstool.engine.stopping import (
        last_stop_signal as last_stop_signal,
    )


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'kstool.engine' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next use is a plain lookup
    return value
