"""How a failed query's error reaches the operator: the death of the source process is told apart
from other failures by the JVM trace of the exception's cause (as pyspark 4.3 keeps it)."""

from types import SimpleNamespace

import pytest

from kstool.engine.exceptions import QueryFailedError, SourceProcessDiedError
from kstool.engine.failures import query_failure

_RUNNER_FRAMES = ("\n\tat java.base/java.io.DataInputStream.readInt(DataInputStream.java:386)"
                  "\n\tat org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner"
                  ".latestOffset(PythonStreamingSourceRunner.scala:144)")


class _Failure(Exception):
    """pyspark's StreamingQueryException as far as kstool reads it: a message and a cause whose
    JVM trace starts with the Java exception."""

    def __init__(self, cause_trace: str):
        super().__init__(cause_trace.splitlines()[0])
        self._cause = SimpleNamespace(_stackTrace=cause_trace)


# each seen when the source process was killed mid-run: which one depends on what the socket held
@pytest.mark.parametrize("first_line", ["java.io.EOFException",
                                        "java.net.SocketException: Connection reset",
                                        "java.net.SocketException: Broken pipe"])
def test_a_lost_socket_to_the_source_runner_is_the_death_of_its_process(first_line):
    assert isinstance(query_failure(_Failure(first_line + _RUNNER_FRAMES), "app"), SourceProcessDiedError)


def test_a_reset_elsewhere_is_a_failure_of_the_query():
    # a Python worker of a task is not the source process: Spark retries the task, or the query fails
    trace = ("java.net.SocketException: Connection reset"
             "\n\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.read(PythonRunner.scala:612)")
    assert type(query_failure(_Failure(trace), "app")) is QueryFailedError


def test_a_source_process_that_did_not_connect_back_in_time_is_started_again_as_a_dead_one():
    # the cause's trace as a full run saw it (a query's start in the warm engine on a busy machine)
    trace = ("org.apache.spark.SparkException: Python worker failed to connect back."
             "\n\tat org.apache.spark.api.python.PythonWorkerFactory.createSimpleWorker(PythonWorkerFactory.scala:328)"
             "\n\tat org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner"
             ".init(PythonStreamingSourceRunner.scala:109)"
             "\nCaused by: java.net.SocketTimeoutException: Timed out while waiting for the Python worker to connect back")
    error = query_failure(_Failure(trace), "app")
    assert isinstance(error, SourceProcessDiedError) and "did not connect back" in str(error)
    # a task's Python worker that did not connect back is no source process: the query fails
    task = trace.replace("PythonStreamingSourceRunner.init(PythonStreamingSourceRunner.scala:109)",
                         "BasePythonRunner.compute(PythonRunner.scala:300)")
    assert type(query_failure(_Failure(task), "app")) is QueryFailedError
