"""Spark needs Java 17+: a run on a machine without it stops before Spark with one line that
says what to install, and `make java` (the first step of `make run` and `make test`) says the
same. A stand-in `java` plays the machine's; no JVM starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_subprocess
from tests.helpers import create_topic, produce_values


def _java_home(tmp_path: Path, version_line: str | None) -> Path:
    """A JAVA_HOME whose bin/java prints `version_line` as `java -version` does (to stderr);
    without one, a home with no java in it."""
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    if version_line is not None:
        java = home / "bin" / "java"
        java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
        java.chmod(0o755)
    return home


def _without_java(tmp_path: Path, version_line: str | None) -> dict:
    # PATH holds no java either: only the stand-in home, if any, is found
    empty = tmp_path / "path"
    empty.mkdir()
    return {"JAVA_HOME": str(_java_home(tmp_path, version_line)), "PATH": str(empty)}


@pytest.mark.parametrize("version_line, said", [
    (None, "Java 17+ is required by Spark and was not found; install it"),
    ('openjdk version "11.0.20" 2023-07-18', "Java 17+ is required by Spark, found 11 at "),
    ('java version "1.8.0_381"', "Java 17+ is required by Spark, found 8 at "),
])
def test_make_java_names_what_is_missing_in_one_line(tmp_path, version_line, said):
    done = subprocess.run([sys.executable, "-c", "from kstool.engine.spark.java import main; main()"],
                          capture_output=True, text=True, env=_without_java(tmp_path, version_line))
    assert done.returncode != 0
    assert done.stderr.startswith(f"error: {said}") and done.stderr.count("\n") == 1, done.stderr
    assert done.stdout == ""


def test_a_run_without_java_stops_before_spark_with_one_line(kafka, topic_name, tmp_path):
    create_topic(kafka, topic_name)
    produce_values(kafka, topic_name, [b"a b", b"b"])
    result = cli_subprocess("run", "wordcount", "--input", topic_name, "--output", f"{topic_name}-out",
                            "--app-id", f"{topic_name}-app", "--once",
                            env=_without_java(tmp_path, 'openjdk version "11.0.20" 2023-07-18'))
    assert result.exit_code != 0
    assert result.stderr.startswith("kstool: error: Java 17+ is required by Spark, found 11 at "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
