"""kstool.engine.spark.session's settings: a JVM started for one command (its driver, a cluster's
executors) compiles with C1 only, one that lives long (the engine's, a continuous run's) keeps
the JVM's default JIT, C2 included; a checkpoint on a local disk is written through Hadoop's
FileSystem; Spark's Python processes start numpy's OpenBLAS with one thread."""

from __future__ import annotations

import click

from kstool.commands.context import Globals
from kstool.commands.run import EngineArgs, build_run_options, engine_options
from kstool.engine.spark.session import SparkOptions, checkpoint_conf, spark_conf

C1_ONLY = "-XX:TieredStopAtLevel=1"  # HotSpot's flag, as `java -XX:+PrintFlagsFinal` names it


def _driver_java_options(options: SparkOptions) -> list[str]:
    return spark_conf(options, "-XX:SharedArchiveFile=/x.jsa")["spark.driver.extraJavaOptions"].split()


def _executor_java_options(options: SparkOptions) -> list[str]:
    return spark_conf(options)["spark.executor.extraJavaOptions"].split()


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
