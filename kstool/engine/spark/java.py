"""Spark needs a Java 17+ runtime; say so clearly instead of failing deep inside py4j."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys

from kstool.engine.exceptions import JavaMissingError

MIN_JAVA = 17
INSTALL_HINT = "install it, e.g. `apt-get install openjdk-17-jre-headless`, or set JAVA_HOME"


def java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


@functools.cache  # one binary, one version: a run checks before it changes anything, Spark's start again
def java_major_version(binary: str) -> int | None:
    try:
        out = subprocess.run([binary, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8" means 8


def require_java() -> int:
    binary = java_binary()
    if binary is None:
        raise JavaMissingError(f"Java {MIN_JAVA}+ is required by Spark and was not found; {INSTALL_HINT}")
    major = java_major_version(binary)
    if major is None or major < MIN_JAVA:
        raise JavaMissingError(
            f"Java {MIN_JAVA}+ is required by Spark, found {major or 'an unknown version'} at "
            f"{binary}; {INSTALL_HINT}")
    return major


def main() -> None:
    """`make java`: the check alone, before anything starts Spark."""
    try:
        print(f"java {require_java()} ok")
    except JavaMissingError as exc:
        sys.exit(f"error: {exc}")
