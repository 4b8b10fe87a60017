"""kstool.engine.spark.jvmcache and its recorder: a run's JVM without an archive only lists the
classes it loads; the recorder turns the list into an archive that a JVM of the run's class path
maps; a run with the archive maps it; the archive `kstool engine prepare` records for the
environment serves a home that has none of its own."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pyspark
import pytest
from pyspark import SparkConf
from pyspark.java_gateway import launch_gateway

from kstool.engine.spark.java import require_java
from kstool.engine.spark.jvm_recorder import listed_classes, record
from kstool.engine.spark.jvmcache import JvmCache
from kstool.engine.spark.spark_home import spark_home, spark_home_for
from tests.conftest import cli


@pytest.fixture
def own_home(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("KSTOOL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KSTOOL_CACHE", raising=False)  # its cache, not the session's
    monkeypatch.delenv("SPARK_HOME", raising=False)
    return tmp_path / "home"


def test_a_jvm_without_an_archive_lists_its_classes_and_one_with_it_maps_it(own_home):
    first = JvmCache(require_java()).java_option()
    assert first.startswith("-XX:DumpLoadedClassList=") and "ArchiveClassesAtExit" not in first
    cache = JvmCache(require_java())
    cache.final.write_bytes(b"an archive")
    assert cache.java_option() == f"-XX:SharedArchiveFile={cache.final}"


def test_a_class_list_gives_its_class_names(tmp_path):
    class_list = tmp_path / "classes"
    class_list.write_text("# NOTE: Do not modify this file.\n#\njava/lang/Object id: 0\nscala/Option\n"
                          "@lambda-proxy java/lang/Runnable run\n@lambda-form-invoker [LF_RESOLVE] x\n\n")
    assert listed_classes(class_list) == ["java.lang.Object", "scala.Option"]


def test_the_recorder_writes_an_archive_that_a_jvm_of_the_runs_class_path_maps(fresh_home, tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_HOME", raising=False)
    home = spark_home_for("local")
    assert home is not None
    class_list, archive = tmp_path / "run.classlist", tmp_path / "run.jsa.tmp"
    class_list.write_text("# a run's list\norg/apache/spark/SparkConf\nscala/Option\nno/such/Clazz\n")
    gone = subprocess.Popen(["true"])
    gone.wait()  # the run's JVM, exited
    record(gone.pid, class_list, archive, home)
    assert archive.stat().st_size > 0 and not class_list.exists()
    # started as kstool starts a run's JVM; with -Xshare:on one that cannot map the archive (another
    # class path, a broken file) exits at once, and the gateway's launch fails
    log = tmp_path / "cds.log"
    conf = SparkConf().set("spark.driver.extraJavaOptions",
                           f"-Xshare:on -XX:SharedArchiveFile={archive} -Xlog:cds=info:file={log}")
    with spark_home(home):
        gateway = launch_gateway(conf, popen_kwargs={"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL})
    assert gateway.jvm.java.lang.Class.forName("org.apache.spark.SparkConf") is not None
    gateway.shutdown()
    gateway.proc.stdin.close()
    gateway.proc.wait(60)
    assert "Mapped dynamic region" in log.read_text()


@pytest.fixture
def prepared(tmp_path: Path, monkeypatch) -> Path:
    """Where this test's environment keeps the archive `kstool engine prepare` records."""
    archive = tmp_path / "share" / "spark.jsa"
    monkeypatch.setattr("kstool.engine.spark.jvmcache.prepared_archive", lambda java_major: archive)
    monkeypatch.setattr("kstool.engine.spark.jvm_recorder.prepared_archive", lambda java_major: archive)
    return archive


def test_a_home_without_an_archive_starts_from_the_prepared_one_and_its_own_comes_first(own_home, prepared):
    farm = spark_home_for("local")
    assert JvmCache(require_java(), farm).java_option().startswith("-XX:DumpLoadedClassList=")
    prepared.parent.mkdir()
    prepared.write_bytes(b"an archive")
    cache = JvmCache(require_java(), farm)
    assert cache.java_option() == f"-XX:SharedArchiveFile={prepared}" and cache.has_archive
    # the user's own SPARK_HOME is another class path: not the prepared archive's
    assert JvmCache(require_java(), None).java_option().startswith("-XX:DumpLoadedClassList=")
    cache.final.write_bytes(b"the home's own")
    assert JvmCache(require_java(), farm).java_option() == f"-XX:SharedArchiveFile={cache.final}"


def test_the_prepared_archive_is_mapped_by_a_jvm_of_any_homes_spark_home(fresh_home, prepared, tmp_path, monkeypatch):
    from kstool.engine.spark import jvm_recorder

    few = tmp_path / "classes.txt.gz"
    few.write_bytes(gzip.compress(b"org.apache.spark.SparkConf\nscala.Option\nno.such.Clazz\n"))
    monkeypatch.setattr(jvm_recorder, "STARTUP_CLASSES", few)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    prepare = cli("engine", "prepare")
    assert prepare.exit_code == 0 and f"class-data archive {prepared} (" in prepare.stderr, prepare.stderr
    assert prepared.stat().st_size > 0
    # recorded on the installed pyspark's path; a home's SPARK_HOME is a folder of links to its files
    farm = spark_home_for("local")
    assert farm is not None and farm != Path(pyspark.__file__).parent
    log = tmp_path / "classes.log"
    conf = SparkConf().set("spark.driver.extraJavaOptions",  # -Xshare:on: a JVM that cannot map it exits
                           f"-Xshare:on -XX:SharedArchiveFile={prepared} -Xlog:class+load=info:file={log}")
    with spark_home(farm):
        gateway = launch_gateway(conf, popen_kwargs={"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL})
    gateway.jvm.java.lang.Class.forName("org.apache.spark.SparkConf")
    gateway.shutdown()
    gateway.proc.stdin.close()
    gateway.proc.wait(60)
    assert "org.apache.spark.SparkConf source: shared objects file (top)" in log.read_text()


def test_a_clusters_executors_map_the_prepared_archive_quietly_and_none_of_a_homes(own_home, prepared):
    farm = spark_home_for("spark://h:7077")
    assert JvmCache(require_java(), farm).executor_java_option() == ""
    prepared.parent.mkdir()
    prepared.write_bytes(b"an archive")
    cache = JvmCache(require_java(), farm)
    cache.final.write_bytes(b"the home's own: a worker does not see the home")
    assert cache.executor_java_option().split() == [f"-XX:SharedArchiveFile={prepared}", "-Xlog:cds=off,cds+dynamic=off"]
    assert JvmCache(require_java(), None).executor_java_option() == ""  # the user's own Spark
