"""kstool.engine.spark.spark_home: the Python processes Spark starts import the installed, compiled
pyspark, not the zip of its sources that Spark puts first on their path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from kstool.engine.spark.spark_home import python_for, spark_home, spark_home_for

INSTALLED = Path(pyspark.__file__).parent


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("KSTOOL_HOME", str(tmp_path))
    monkeypatch.delenv("KSTOOL_CACHE", raising=False)  # its cache, not the session's
    monkeypatch.delenv("SPARK_HOME", raising=False)
    return tmp_path


def _pyspark_imported_from(spark_home: Path) -> str:
    """Where `import pyspark` comes from in a Python process on the path Spark gives its Python
    processes: $SPARK_HOME/python/lib's py4j and pyspark zips first (PythonUtils.sparkPythonPath)."""
    lib = spark_home / "python" / "lib"
    path = os.pathsep.join([str(lib / zip_.name) for zip_ in sorted((INSTALLED / "python" / "lib").glob("*.zip"))])
    return subprocess.run([sys.executable, "-c", "import pyspark; print(pyspark.__file__)"], capture_output=True,
                          text=True, check=True, env={**os.environ, "PYTHONPATH": path}).stdout.strip()


def test_a_local_or_standalone_jvm_gets_the_installed_pyspark_but_its_python_folder(home):
    for master in ("local[2]", "spark://127.0.0.1:7077"):
        spark_home = spark_home_for(master)
        assert spark_home is not None and spark_home.is_relative_to(home)
        assert sorted(p.name for p in spark_home.iterdir()) == sorted(p.name for p in INSTALLED.iterdir()
                                                                      if p.name != "python")
        assert (spark_home / "bin" / "spark-submit").is_file() and any((spark_home / "jars").glob("spark-core*.jar"))


def test_its_python_processes_import_the_compiled_pyspark_instead_of_the_zip(home):
    assert ".zip" in _pyspark_imported_from(INSTALLED)  # what Spark's processes did
    assert _pyspark_imported_from(spark_home_for("local[2]")) == str(INSTALLED / "__init__.py")


def test_a_users_spark_home_and_yarn_which_ships_the_zip_are_left_alone(home, monkeypatch):
    assert spark_home_for("yarn") is None
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert spark_home_for("local[2]") is None


def test_the_home_is_set_only_while_a_jvm_is_launched(home, monkeypatch):
    folder = spark_home_for("local[2]")
    with spark_home(folder):
        assert os.environ["SPARK_HOME"] == str(folder)
    assert "SPARK_HOME" not in os.environ  # kstool's later work and its subprocesses see no change
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    with spark_home(None):
        assert os.environ["SPARK_HOME"] == "/opt/spark"


def test_a_local_runs_python_starts_without_the_jars_spark_puts_on_its_path(home):
    """Spark puts its spark-core jar on its Python processes' path (PythonUtils.sparkPythonPath),
    whose directory Python reads when it starts: a local run's Python leaves it out, and is this
    interpreter with every other entry of the path in its order."""
    jar = next((INSTALLED / "jars").glob("spark-core*.jar"))
    kept = [str(home / "a b"), str(home / "*")]  # a space, and a glob character kept as it is
    python = python_for("local[2]")
    assert python != sys.executable
    started = subprocess.run([python, "-c", "import json, sys; print(sys.executable); print(json.dumps(sys.path))"],
                             env={**os.environ, "PYTHONPATH": os.pathsep.join([str(jar), *kept])},
                             capture_output=True, text=True, check=True).stdout.splitlines()
    assert started[0] == sys.executable
    path = json.loads(started[1])
    assert str(jar) not in path and [p for p in path if p in kept] == kept
    assert python_for("spark://127.0.0.1:7077") == sys.executable  # a cluster's workers may not see the launcher
