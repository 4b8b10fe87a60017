"""kstool.engine.spark.session's settings: a JVM started for one command (its driver, a cluster's
executors) compiles with C1 only, one that lives long (the engine's, a continuous run's) keeps
the JVM's default JIT, C2 included; a user's Java options add to kstool's; a checkpoint on a
local disk is written through Hadoop's FileSystem; Spark's Python processes start numpy's
OpenBLAS with one thread."""

from __future__ import annotations

import os
from pathlib import Path

import click

from kstool.commands.context import Globals
from kstool.commands.run import EngineArgs, build_run_options, engine_options
from kstool.engine.spark.session import LOG4J_CONFIG, SparkOptions, checkpoint_conf, spark_conf
from tests.conftest import cli_subprocess
from tests.helpers import create_topic, produce_values

C1_ONLY = "-XX:TieredStopAtLevel=1"  # HotSpot's flag, as `java -XX:+PrintFlagsFinal` names it


def _driver_java_options(options: SparkOptions) -> list[str]:
    return spark_conf(options, "-XX:SharedArchiveFile=/x.jsa")["spark.driver.defaultJavaOptions"].split()


def _executor_java_options(options: SparkOptions) -> list[str]:
    return spark_conf(options)["spark.executor.defaultJavaOptions"].split()


def _engine_args(*argv: str) -> EngineArgs:
    """The run options as a command line gives them (the run commands' own option defaults)."""
    seen: list[EngineArgs] = []

    @click.command()
    @engine_options
    def probe(engine: EngineArgs) -> None:
        seen.append(engine)

    probe.main(list(argv), standalone_mode=False)
    return seen[0]


def test_a_jvm_for_one_command_compiles_with_c1_only_and_a_long_lived_one_keeps_c2():
    one_command = _driver_java_options(SparkOptions(master="local[2]"))
    long_lived = _driver_java_options(SparkOptions(master="local[2]", long_lived=True))
    assert C1_ONLY in one_command and not any(o.startswith("-XX:TieredStopAtLevel") for o in long_lived)
    for options in (one_command, long_lived):  # kstool's own settings stay
        assert "-XX:SharedArchiveFile=/x.jsa" in options and any(o.startswith("-Dlog4j2.configurationFile=")
                                                                 for o in options)


def test_a_clusters_executors_compile_as_the_driver_does():
    one_command = _executor_java_options(SparkOptions(master="spark://h:7077"))
    long_lived = _executor_java_options(SparkOptions(master="spark://h:7077", long_lived=True))
    assert C1_ONLY in one_command and not any(o.startswith("-XX:TieredStopAtLevel") for o in long_lived)
    assert all(any(o.startswith("-Dlog4j2.configurationFile=") for o in options) for options in (one_command, long_lived))


def test_a_once_run_starts_a_one_command_jvm_and_a_continuous_run_a_long_lived_one():
    engine = _engine_args("--master", "local[2]")
    assert not build_run_options(Globals(), "app", True, engine).spark.long_lived
    assert build_run_options(Globals(), "app", False, engine).spark.long_lived


def test_a_local_checkpoint_is_written_through_hadoops_file_system_and_any_other_through_file_context():
    # Spark's class names (org.apache.spark.sql.execution.streaming.checkpointing in Spark 4.3);
    # FileContext's rename is the one that overwrites atomically on HDFS, so only local disks change
    manager = "spark.sql.streaming.checkpointFileManagerClass"
    assert checkpoint_conf(True) == {
        manager: "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"}
    assert manager not in checkpoint_conf(False)


def test_sparks_python_processes_start_openblas_with_one_thread_unless_the_user_says_otherwise():
    # numpy's OpenBLAS reads OPENBLAS_NUM_THREADS at import; Spark hands executorEnv to its Python processes
    variable = "spark.executorEnv.OPENBLAS_NUM_THREADS"
    assert spark_conf(SparkOptions(master="local[2]"))[variable] == "1"
    assert spark_conf(SparkOptions(master="local[2]", conf={variable: "4"}))[variable] == "4"


def test_java_options_of_the_users_add_to_kstools(kafka, topic_name):
    """A `--conf spark.driver.extraJavaOptions=...` of the user's keeps kstool's own JVM options
    (Spark's defaultJavaOptions, put before it): its scratch folder and log settings are there
    beside the user's property (-XshowSettings prints the JVM's properties into its log)."""
    create_topic(kafka, topic_name, 1)
    produce_values(kafka, topic_name, [b"a b"])
    ran = cli_subprocess("run", "wordcount", "--input", topic_name, "--output", topic_name + "-out", "--app-id",
                         topic_name, "--once", "--conf",
                         "spark.driver.extraJavaOptions=-Dkstool.probe=given -XshowSettings:properties")
    assert ran.exit_code == 0, ran.stderr
    home = Path(os.environ["KSTOOL_HOME"])
    properties = (home / "apps" / topic_name / "spark.log").read_text()
    assert "kstool.probe = given" in properties
    assert f"java.io.tmpdir = {home / 'tmp' / 'jvm-'}" in properties  # kstool's scratch folder (kstool.engine.spark.scratch)
    assert f"log4j2.configurationFile = file:{LOG4J_CONFIG}" in properties
