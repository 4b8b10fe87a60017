"""The Spark session factory. The only module that starts Spark; pyspark is imported here,
never at the import time of modules the Kafka-only commands load."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kstool.engine.java import require_java

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


@dataclass
class SparkOptions:
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    shuffle_partitions: int | None = None
    ui: bool = False
    debug: bool = False


def spark_conf(options: SparkOptions) -> dict[str, str]:
    log_opt = "" if options.debug else f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"
    conf = {
        "spark.ui.enabled": str(options.ui).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        # the change feed and snapshot reads of `kstool state` need changelog checkpointing
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": log_opt,
        "spark.executor.extraJavaOptions": log_opt,
    }
    if options.shuffle_partitions:
        conf["spark.sql.shuffle.partitions"] = str(options.shuffle_partitions)
    conf.update(options.conf)
    return conf


def build_session(options: SparkOptions, app_name: str = "kstool", log_file: Path | None = None):
    """Start Spark. The JVM's own output goes to log_file (or is dropped): operators read
    kstool's lines; --debug shows everything."""
    require_java()
    # Python workers must run this interpreter, or they will not find confluent-kafka
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    conf = SparkConf().setMaster(options.master).setAppName(app_name)
    for key, value in spark_conf(options).items():
        conf.set(key, value)
    if SparkContext._active_spark_context is None and not options.debug:
        with open(log_file or os.devnull, "ab") as sink:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": sink, "stderr": sink})
        context = SparkContext(conf=conf, gateway=gateway)
    else:
        context = SparkContext.getOrCreate(conf)
    spark = SparkSession(context)
    context.setLogLevel("DEBUG" if options.debug else "ERROR")
    from kstool.engine.source import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)
    return spark
