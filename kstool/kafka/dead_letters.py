"""Dead letters in Kafka Streams' form (KIP-1034, Kafka Streams 4.2+), which both Kafka Streams'
built-in handlers and `kstool run --on-error dlq:TOPIC` write: the failed record's raw key and
value bytes and timestamp, its own headers, then UTF-8 headers naming the error and where the
record came from (ExceptionHandlerUtils.buildDeadLetterQueueRecord)."""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "__streams.errors."
EXCEPTION, MESSAGE, STACKTRACE = PREFIX + "exception", PREFIX + "message", PREFIX + "stacktrace"
TOPIC, PARTITION, OFFSET = PREFIX + "topic", PREFIX + "partition", PREFIX + "offset"
APP = "kstool.dlq.app"  # kstool's one addition: which app wrote it (Kafka Streams' headers do not say)

Headers = list[tuple[str, bytes | None]]


def error_headers(exception: str, message: str | None, stacktrace: str, topic: str, partition: int,
                  offset: int) -> Headers:
    """The headers a dead letter adds to its record's own, in Kafka Streams' order; a missing
    message is a header with a null value, as Kafka's StringSerializer writes it."""
    return [(EXCEPTION, exception.encode()), (MESSAGE, None if message is None else message.encode()),
            (STACKTRACE, stacktrace.encode()), (TOPIC, topic.encode()), (PARTITION, str(partition).encode()),
            (OFFSET, str(offset).encode())]


@dataclass(frozen=True)
class DeadLetter:
    """What a dead letter's headers say; topic, partition and offset are None where Kafka Streams
    had no source record (an error under punctuation)."""

    exception: str | None
    message: str | None
    topic: str | None
    partition: int | None
    offset: int | None

    @classmethod
    def of(cls, headers: Headers) -> "DeadLetter | None":
        """None for a record that is not a dead letter. The last header of a name counts (Kafka's
        Headers.lastHeader): a dead letter of a dead letter carries both sets."""
        found = {name: value for name, value in headers if name.startswith(PREFIX)}
        if EXCEPTION not in found:
            return None
        return cls(_text(found.get(EXCEPTION)), _text(found.get(MESSAGE)), _text(found.get(TOPIC)),
                   _number(found.get(PARTITION)), _number(found.get(OFFSET)))

    def to_dict(self) -> dict[str, object]:
        return {"exception": self.exception, "message": self.message, "topic": self.topic,
                "partition": self.partition, "offset": self.offset}

    def summary(self) -> str:
        """One line for a table: what failed, and where the record came from."""
        where = "" if self.topic is None else f" (from {self.topic}:{self.partition} offset {self.offset})"
        return f"{self.exception}: {self.message}{where}" if self.message else f"{self.exception}{where}"


def without_error_headers(headers: Headers) -> Headers:
    """A dead letter's record as it was: its own headers, the error's taken off."""
    return [(name, value) for name, value in headers if not name.startswith(PREFIX) and name != APP]


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


def _number(value: bytes | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        return None
