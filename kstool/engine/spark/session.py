"""The Spark session factory. The only module that starts Spark; pyspark is imported here,
never at the import time of modules the Kafka-only commands load."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

from kstool.engine.spark.java import require_java
from kstool.engine.spark.jvm_reaper import reap_at_exit
from kstool.engine.spark.jvmcache import JvmCache
from kstool.engine.spark.python_forks import forking_pythons
from kstool.engine.spark.scratch import ScratchDir
from kstool.engine.spark.spark_home import python_for, spark_home, spark_home_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
_jvm_log: Path | None = None  # the file this process's JVM writes its output to, when kstool started it
C1_ONLY = "-XX:TieredStopAtLevel=1"
# Spark writes checkpoint files through Hadoop's FileContext by default, which on a local disk
# (pyspark ships no native Hadoop library) forks `readlink` and `chmod` for each file: ~80 ms
# per state store and batch, the largest part of a small batch (bench/notes/what-mattered.md).
# Through FileSystem a local rename still replaces its target atomically (rename(2));
# other schemes keep FileContext, whose rename overwrites atomically where FileSystem's may not.
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
LOCAL_CHECKPOINT_FILES = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


@dataclass
class SparkOptions:
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    shuffle_partitions: int | None = None
    ui: bool = False
    debug: bool = False
    # A JVM for one command (a --once run, a state query) compiles with C1 only: on 2 cores C2's
    # compiler threads take the cores from the run's own work and cost more than their code
    # gains, even over 5M records (bench/notes/what-mattered.md). The engine's JVM and a
    # continuous run's live long enough for C2 to pay.
    long_lived: bool = False


def spark_conf(options: SparkOptions, driver_java_options: str = "", scratch: Path | None = None,
               executor_java_options: str = "") -> dict[str, str]:
    log_opt = "" if options.debug else f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"
    # a cluster's executors live as long as the run: C2 pays for a long one only (executors under a
    # 0.4-core quota used 33% less CPU over 1M records with C1: bench/notes/scale-out.md)
    jit = "" if options.long_lived else C1_ONLY
    conf = {
        "spark.ui.enabled": str(options.ui).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        # the change feed and snapshot reads of `kstool state` need changelog checkpointing
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # a Python worker that crashes leaves its Python stack in the query's error, not only "crashed"
        "spark.python.worker.faulthandler.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        # Hadoop applies its own umask (022) to the checkpoint files it writes
        "spark.hadoop.fs.permissions.umask-mode": "077",
        # kstool's JVM options as Spark's defaults, which Spark puts before the extraJavaOptions: a
        # `--conf spark.driver.extraJavaOptions=...` of the user's adds to them instead of
        # dropping the scratch folder, the class-data archive and the log settings with them
        "spark.driver.defaultJavaOptions": " ".join(filter(None, (log_opt, driver_java_options, jit))),
        "spark.executor.defaultJavaOptions": " ".join(filter(None, (log_opt, executor_java_options, jit))),
        # Spark passes executorEnv to every Python process it starts (task workers, the sources'
        # planners and runners), local or not. numpy, which kstool imports there, starts OpenBLAS
        # with a thread per core that spins before it sleeps: ~60 ms of CPU a process for matrix
        # work kstool never does
        "spark.executorEnv.OPENBLAS_NUM_THREADS": "1",
        # the task workers fork with their modules loaded (kstool.engine.spark.python_daemon)
        "spark.python.daemon.module": "kstool.engine.spark.python_daemon",
    }
    if scratch is not None:  # the driver's (and a local run's executors'); a cluster's workers set their own
        conf["spark.local.dir"] = str(scratch)
    if options.shuffle_partitions:
        conf["spark.sql.shuffle.partitions"] = str(options.shuffle_partitions)
    conf.update(options.conf)
    return conf


def checkpoint_conf(local: bool) -> dict[str, str]:
    """The Spark settings for writing a checkpoint on a local (or mounted) disk, or elsewhere."""
    return {CHECKPOINT_FILE_MANAGER: LOCAL_CHECKPOINT_FILES} if local else {}


def _quiet_pyspark_loggers() -> None:
    """PySpark logs every failed DataFrame call as a JSON stack trace on stderr; kstool reports
    errors itself, in one line."""
    import logging

    from pyspark.logger import PySparkLogger

    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


def run_session(options: SparkOptions, app_id: str, log_file: Path, say: Callable[[str], None] | None = None) -> SparkSession:
    """A run's Spark session (on the JVM a first call started, when there was one)."""
    spark, _ = build_session(options, app_name=f"kstool-{app_id}", log_file=log_file, say=say)
    return spark


def build_session(options: SparkOptions, app_name: str = "kstool", log_file: Path | None = None,
                  say: Callable[[str], None] | None = None) -> tuple[SparkSession, bool]:
    """Return (spark, owned). Starts Spark unless a SparkContext is already active in this
    process (tests share one), in which case a new session on it gets this run's SQL settings
    and `owned` is False: the caller must not stop it. The JVM's own output goes to log_file
    (or is dropped): operators read kstool's lines; --debug shows everything. `say`: what a
    start is doing, for the person waiting on it."""
    java_major = require_java()
    from pyspark import SparkContext

    # Spark writes checkpoints and logs under kstool's home: private to the user, like the rest
    os.umask(0o077)
    if not options.debug:
        _quiet_pyspark_loggers()
    owned = SparkContext._active_spark_context is None
    if owned:
        # Python workers must run this interpreter, or they will not find confluent-kafka (the
        # context reads it when it starts); the driver's (the data sources' lookup) too
        os.environ["PYSPARK_PYTHON"] = python_for(options.master)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", os.environ["PYSPARK_PYTHON"])
        home = spark_home_for(options.master)
        jvm_cache, scratch = JvmCache(java_major, home), ScratchDir()
        settings = spark_conf(options, f"{jvm_cache.java_option()} {scratch.java_option()}".strip(), scratch.path,
                              jvm_cache.executor_java_option())
        if say is not None:
            say(f"starting Spark ({options.master}): its JVM, then Python workers"
                + ("" if jvm_cache.has_archive else
                   "; a first start in this kstool home, with no class-data archive yet (it is recorded after "
                   "this run: later starts take seconds less; `kstool engine prepare` records one for every home)"))
        spark = _start(options, app_name, settings, home, jvm_cache, scratch, log_file)
    else:
        spark = _session_on_the_active_context(spark_conf(options))
    _register_kafka_source(spark)
    return spark, owned


def _start(options: SparkOptions, app_name: str, settings: dict[str, str], home: Path | None, jvm_cache: JvmCache,
           scratch: ScratchDir, log_file: Path | None) -> SparkSession:
    global _jvm_log
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    conf = SparkConf(loadDefaults=False).setMaster(options.master).setAppName(app_name)  # a stopped JVM's are not ours
    for key, value in settings.items():
        conf.set(key, value)
    forks = forking_pythons(log_file) if options.master.startswith("local") else contextlib.nullcontext()
    if options.debug:
        with spark_home(home), forks:
            context = SparkContext(conf=conf)
    else:
        # Own session: a SIGTERM/SIGINT to kstool's process group must reach kstool (which
        # stops after the current batch), not kill the JVM mid-batch. The JVM still exits
        # when kstool does: it watches its stdin pipe. It holds its scratch folder's lock too.
        _jvm_log = log_file
        with open(log_file or os.devnull, "ab") as sink, spark_home(home), forks:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": sink, "stderr": sink, "start_new_session": True,
                                                         "pass_fds": (scratch.lock_fd,)})
        jvm_pid = getattr(gateway, "proc", None) and gateway.proc.pid
        jvm_cache.started(jvm_pid)
        if jvm_pid:
            reap_at_exit(jvm_pid)
        context = SparkContext(conf=conf, gateway=gateway)
    context.setLogLevel("DEBUG" if options.debug else "ERROR")
    return SparkSession(context)


def _session_on_the_active_context(settings: dict[str, str]) -> SparkSession:
    """A clone of its own: runs sharing the context (the engine's, the tests') may set different
    SQL settings at the same time. Not newSession(): a new session cannot see the Python data
    source, nor register it again (Spark 4.3)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    shared = SparkSession(cast(SparkContext, SparkContext._active_spark_context))
    spark = SparkSession(shared.sparkContext, jsparkSession=shared._jsparkSession.cloneSession())
    for key, value in settings.items():
        if key.startswith("spark.sql."):
            spark.conf.set(key, value)
    return spark


def _register_kafka_source(spark: SparkSession) -> None:
    from pyspark.errors import AnalysisException

    from kstool.engine.io.source import KafkaDataSource

    try:
        spark.dataSource.register(KafkaDataSource)
    except AnalysisException as exc:
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):  # a shared session has it already
            raise


def jvm_log() -> Path | None:
    """The file this process's JVM writes its output to (None: nowhere kstool reads)."""
    return _jvm_log


def jvm_heap_bytes() -> int:
    """The most heap this process's JVM may take (-Xmx)."""
    from pyspark import SparkContext

    jvm = cast(Any, cast(SparkContext, SparkContext._active_spark_context)._jvm)
    return int(jvm.java.lang.Runtime.getRuntime().maxMemory())


def start_local_spark() -> object:
    """A small local Spark for reading checkpoints on Hadoop file systems (kstool.checkpoint.files)."""
    spark, _ = build_session(SparkOptions(master="local[1]"), "kstool-checkpoint")
    return spark
