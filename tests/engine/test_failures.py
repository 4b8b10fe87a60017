"""How a failed query's error reaches the operator: the death of the source process is told apart
from other failures by the JVM trace of the exception's cause (as pyspark 4.3 keeps it), and a
JVM out of heap by what its log says while the run goes on."""

from types import SimpleNamespace

import pytest

from kstool.engine.exceptions import HeapExhaustedError, QueryFailedError, SourceProcessDiedError
from kstool.engine.failures import heap_named, query_failure

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


# the lines the engine's JVM wrote when a stream-stream join's task ran it out of heap
# (spark.log, 2026-11-28, engine started with --driver-memory 480m and eight queries parked)
_OUT_OF_HEAP = ('Exception in thread "stateConnectionListenerThread" java.lang.OutOfMemoryError: Java heap space\n'
                "\tat org.apache.spark.sql.catalyst.expressions.UnsafeDataUtils.getBytes(UnsafeDataUtils.java:35)\n")
_WORKER_FAILED = "streaming query failed: pyspark.errors.exceptions.captured.PythonException: " \
                 "An exception was thrown from the Python worker:"


def _run_failing(log, error: Exception, written_meanwhile: str = "") -> Exception:
    with pytest.raises(Exception) as raised, heap_named(log, lambda: "Give it more."):
        with log.open("a") as lines:
            lines.write(written_meanwhile)
        raise error
    return raised.value


def test_a_failure_while_the_jvm_ran_out_of_heap_names_the_heap_and_the_remedy(tmp_path):
    log = tmp_path / "spark.log"
    log.write_text("12:00:01 ERROR Executor: an earlier run's error\n")
    error = _run_failing(log, QueryFailedError(_WORKER_FAILED), "Streaming worker started\n" + _OUT_OF_HEAP)
    assert isinstance(error, HeapExhaustedError)
    assert str(error) == (f"Spark's JVM ran out of heap (java.lang.OutOfMemoryError: Java heap space; its log: {log})."
                          " Give it more.")


@pytest.mark.parametrize("before, meanwhile, error", [
    (_OUT_OF_HEAP, "", QueryFailedError(_WORKER_FAILED)),  # an earlier run's, in an engine's log
    ("", "", QueryFailedError(_WORKER_FAILED)),  # no word of the heap
    ("", _OUT_OF_HEAP, SourceProcessDiedError("the query's Python source process died")),  # told apart already
    ("", _OUT_OF_HEAP, ValueError("not a query's failure")),
])
def test_other_failures_go_on_as_they_are(tmp_path, before, meanwhile, error):
    log = tmp_path / "spark.log"
    log.write_text(before)
    assert _run_failing(log, error, meanwhile) is error


def test_the_heap_error_is_found_across_the_log_read_in_blocks(tmp_path):
    log = tmp_path / "spark.log"
    log.write_text("")
    # "java.lang.OutOfMemoryError: Java heap space" straddles the edge of the reader's 1 MiB blocks
    filler = "x" * ((1 << 20) - 10 - _OUT_OF_HEAP.index("java.lang"))
    assert isinstance(_run_failing(log, QueryFailedError(_WORKER_FAILED), filler + _OUT_OF_HEAP), HeapExhaustedError)
