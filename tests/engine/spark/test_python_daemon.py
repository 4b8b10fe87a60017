"""kstool's Python daemon (kstool.engine.spark.python_daemon) loads its task workers' modules
before it forks them: loading them must start no thread, which a forked worker would not have."""

from __future__ import annotations

import os
import subprocess
import sys

from kstool.engine.spark.session import SparkOptions, spark_conf

THREADS = "import os, kstool.engine.spark.python_daemon; print(len(os.listdir('/proc/self/task')))"


def test_the_daemon_loads_its_workers_modules_without_starting_a_thread():
    conf = spark_conf(SparkOptions(master="local[2]"))
    assert conf["spark.python.daemon.module"] == "kstool.engine.spark.python_daemon"
    spark_env = {key.removeprefix("spark.executorEnv."): value for key, value in conf.items()
                 if key.startswith("spark.executorEnv.")}  # what Spark gives its Python processes
    env = {**{k: v for k, v in os.environ.items() if k != "JE_ARROW_MALLOC_CONF"}, **spark_env}
    threads = subprocess.run([sys.executable, "-c", THREADS], env=env, capture_output=True, text=True, check=True)
    assert threads.stdout.strip() == "1"
