"""How errors raised inside Spark reach the operator. Python code running in the query raises
RuntimeError with a marker at the start of its message; Spark wraps it in JVM traces, and
`translate` digs out the marked line. One home for the markers, used to raise and to read."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kstool.application.exceptions import StateMissingError
from kstool.engine.exceptions import DataLossError, HeapExhaustedError, QueryFailedError, SourceProcessDiedError

DATA_LOSS = "kstool-data-loss:"  # input offsets lost to retention or a recreated topic
BAD_RECORD = "kstool-bad-record:"  # --on-error fail met a record it cannot process
SINK = "kstool-sink:"  # records that had to be written were not
_MARKERS = (DATA_LOSS, BAD_RECORD, SINK)


def marked(marker: str, message: str) -> RuntimeError:
    """The error to raise inside the query."""
    return RuntimeError(f"{marker} {message}")


def state_missing_remedy(app_id: str) -> str:
    return ("The state files are missing at the checkpoint location, usually because it is not storage "
            "every executor shares (see --checkpoint-location). To go on, restore the state from the "
            f"changelogs: `kstool state restore --app-id {app_id}`, or reprocess: "
            f"`kstool reset --app-id {app_id} --to-earliest`; then run again")


def query_failure(failure: BaseException, app_id: str) -> Exception:
    """A failed query's exception (pyspark's StreamingQueryException) as a kstool error."""
    if _source_runner_failed(failure, _DEAD_PEER):
        return SourceProcessDiedError("the query's Python source process died (the engine's or Spark's log "
                                      "may say why)")
    if _source_runner_failed(failure, _NOT_CONNECTED):
        return SourceProcessDiedError("the query's Python source process did not connect back to Spark in "
                                      "time (a busy machine)")
    return translate(str(failure), app_id)


# how the source runner's socket fails when the process at its other end is gone: end-of-file,
# or a reset when the process died with bytes unread (or a broken pipe when Spark was writing)
_DEAD_PEER = ("java.io.EOFException", "java.net.SocketException: Connection reset",
              "java.net.SocketException: Broken pipe")
# Spark gave up waiting for the source process it started to connect back (seen once on a busy
# 2-core machine, at a query's start in the warm engine)
_NOT_CONNECTED = ("org.apache.spark.SparkException: Python worker failed to connect back",)


def _source_runner_failed(failure: BaseException, how: tuple[str, ...]) -> bool:
    """Spark's source runner failed as `how` says (the start of the Java exception): the
    exception says so only in the cause's JVM trace (pyspark keeps the cause and its trace in
    private fields, for pyspark 4.3)."""
    cause = getattr(failure, "_cause", None)
    trace = str(getattr(cause, "_stackTrace", "") or "")
    return trace.startswith(how) and "PythonStreamingSourceRunner" in trace


def translate(text: str, app_id: str) -> Exception:
    """The one line that matters of a failed query's error text, as a kstool error."""
    # the query's plan follows the error and holds our marker literals too: search before it
    text = text.split("=== Streaming Query ===")[0]
    lost = re.search(r"CANNOT_LOAD_STATE_STORE.*?(\S+ does not exist)", text, re.S)
    if lost:
        return StateMissingError(f"Spark cannot load the app's state: {lost.group(1)}. {state_missing_remedy(app_id)}")
    for marker in _MARKERS:
        index = text.find(marker)
        if index >= 0:
            line = text[index:].splitlines()[0]
            message = re.sub(r"\s*SQLSTATE: \w+$", "", line[len(marker):].strip()).rstrip('."')
            return DataLossError(message) if marker == DATA_LOSS else QueryFailedError(message)
    # py4j puts the Java exception on a line of its own that starts with ": "
    lines = [line.strip().lstrip(": ") for line in text.splitlines()
             if re.match(r"\s*(: )?[\w.]+(Error|Exception): ", line)]
    return QueryFailedError(f"streaming query failed: {(lines[-1] if lines else text.splitlines()[0])[:500]}")


# how the JVM's log tells it ran out of heap (a thread's uncaught error, a task's failure)
HEAP_EXHAUSTED = b"java.lang.OutOfMemoryError: Java heap space"


@contextmanager
def heap_named(log: Path, remedy: Callable[[], str]) -> Iterator[None]:
    """A query that fails while its JVM runs out of heap says so, with `remedy`. The query's
    own error tells only what that did to a Python worker (e.g. the state server it was
    talking to died: "An exception was thrown from the Python worker"), so the JVM's log,
    from where it stood when the block began, is read for it."""
    start = _size(log)
    try:
        yield
    except QueryFailedError as failure:
        if type(failure) is not QueryFailedError or not _written_since(log, start, HEAP_EXHAUSTED):
            raise
        raise HeapExhaustedError(f"Spark's JVM ran out of heap ({HEAP_EXHAUSTED.decode()}; its log: {log}). "
                                 f"{remedy()}") from None


def _size(log: Path) -> int:
    try:
        return log.stat().st_size
    except OSError:  # not written yet
        return 0


def _written_since(log: Path, start: int, text: bytes, chunk: int = 1 << 20) -> bool:
    try:
        with log.open("rb") as lines:
            lines.seek(start)
            tail = b""
            while block := lines.read(chunk):
                if text in tail + block:
                    return True
                tail = block[-len(text):]
    except OSError:
        pass
    return False
