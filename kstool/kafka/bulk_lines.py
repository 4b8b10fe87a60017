"""`produce`'s text lines a batch at a time, when each line becomes a record as it is (no schema,
no headers): the input is read in blocks, split into lines at once, and each partition's
records go through librdkafka's batch call, with no Python call per record to send it or to
report its delivery (only a dict to hand it over).

Partitions are chosen here, so the counts per partition are known without a delivery report per
record: Kafka's murmur2 for keyed records (the Java client's and librdkafka's murmur2_random), and
for null keys a partition at a time, BATCH_LINES records each, from a random one on (the Java
client's sticky partitioner, KIP-480, where librdkafka would pick one per record)."""

from __future__ import annotations

import gc
import random
from collections import Counter
from collections.abc import Callable, Iterator
from typing import IO

from kstool.kafka.bulk import BulkWriter
from kstool.kafka.partitioner import partition_for, partitions_for

READ_BYTES = 1 << 20  # at most, at a time: a pipe gives what it has (a line typed is sent)
BATCH_LINES = 10_000  # records per batch call, and null keys' records per partition in turn
# the blocks kept to name a record that failed by its line; the writer is flushed when they hold more
FLUSH_BYTES = 8 << 20


class LineBatches:
    """Writes lines to `topic` through `writer` (an errors_only one made with locate=self.locate)."""

    def __init__(self, topic: str, partition_count: int, partition: int | None = None,
                 key_delimiter: bytes | None = None, fixed_key: bytes | None = None):
        self.topic, self.count, self.partition = topic, partition_count, partition
        self.delimiter, self.fixed_key = key_delimiter, fixed_key
        self.per_partition: Counter[int] = Counter()
        self.lines = 0  # lines read so far
        self.written = 0  # records delivered, as of the last flush
        self._null_keys = 0  # records with a null key so far (their partition takes turns)
        self._first_null_partition = random.randrange(partition_count)
        self._sent: list[tuple[int, list[bytes | None] | None, list[bytes]]] = []  # since the flush

    def write(self, writer: BulkWriter, stream: IO[bytes], flush: Callable[[int], int]) -> None:
        """flush(written so far): the writer's, returning what it delivered since the last one."""
        # no garbage collection meanwhile: each record's dict for the batch call is a container,
        # and a collection every 700 of them walked them again to find nothing (5% of the time)
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._write(writer, stream, flush)
        finally:
            if collecting:
                gc.enable()

    def _write(self, writer: BulkWriter, stream: IO[bytes], flush: Callable[[int], int]) -> None:
        kept = 0
        for lines in _line_blocks(stream):
            keys, values = self._split(lines)
            self._sent.append((self.lines, keys, values))
            self.lines += len(lines)
            self._send(writer, keys, values)
            kept += sum(map(len, lines))
            if kept > FLUSH_BYTES:
                self.written += flush(self.written)
                self._sent.clear()
                kept = 0

    def locate(self, key: bytes | None, value: bytes | None) -> str | None:
        """The line of the first record sent since the last flush with this key and value."""
        for first_line, keys, values in self._sent:
            for i, sent in enumerate(values):
                if sent == value and (keys[i] if keys is not None else self.fixed_key) == key:
                    return f"line {first_line + i + 1}"
        return None

    def _split(self, lines: list[bytes]) -> tuple[list[bytes | None] | None, list[bytes]]:
        """(keys, values); keys None: every record has fixed_key (or none). A line without the
        delimiter has a null key, as kcat -K does."""
        if self.delimiter is None:
            return None, lines
        delimiter = self.delimiter
        pairs = [line.split(delimiter, 1) for line in lines]
        return [pair[0] if len(pair) == 2 else None for pair in pairs], [pair[-1] for pair in pairs]

    def _send(self, writer: BulkWriter, keys: list[bytes | None] | None, values: list[bytes]) -> None:
        if self.partition is not None or (keys is None and self.fixed_key is not None):
            partition = self.partition if self.partition is not None else partition_for(
                self.fixed_key or b"", self.count)
            self._send_to(writer, partition, keys, values)
        elif keys is None:
            self._send_null_keyed(writer, values)
        else:
            self._send_keyed(writer, keys, values)

    def _send_to(self, writer: BulkWriter, partition: int, keys: list[bytes | None] | None,
                 values: list[bytes]) -> None:
        if keys is None and self.fixed_key is not None:
            keys = [self.fixed_key] * len(values)
        for start in range(0, len(values), BATCH_LINES):
            writer.send_batch(self.topic, partition, values[start:start + BATCH_LINES],
                              None if keys is None else keys[start:start + BATCH_LINES])
        self.per_partition[partition] += len(values)

    def _send_null_keyed(self, writer: BulkWriter, values: list[bytes]) -> None:
        start = 0
        while start < len(values):
            turn, into = divmod(self._null_keys, BATCH_LINES)
            end = min(len(values), start + BATCH_LINES - into)
            self._send_to(writer, (self._first_null_partition + turn) % self.count, None, values[start:end])
            self._null_keys += end - start
            start = end

    def _send_keyed(self, writer: BulkWriter, keys: list[bytes | None], values: list[bytes]) -> None:
        """Each partition's records in the order of their lines: keyed ones where their key says,
        null keys' in turn."""
        keyed = [i for i, key in enumerate(keys) if key is not None]
        present = [key for key in keys if key is not None]
        chosen = dict(zip(keyed, partitions_for(present, self.count).tolist() if present else []))
        by_partition: dict[int, list[int]] = {}
        for i, key in enumerate(keys):
            if key is None:
                chosen[i] = (self._first_null_partition + self._null_keys // BATCH_LINES) % self.count
                self._null_keys += 1
            by_partition.setdefault(chosen[i], []).append(i)
        for partition, indexes in sorted(by_partition.items()):
            self._send_to(writer, partition, [keys[i] for i in indexes], [values[i] for i in indexes])


def _line_blocks(stream: IO[bytes]) -> Iterator[list[bytes]]:
    """The input's lines, a block at a time (as `for line in stream` would give them, without
    their line ends: \\n and any \\r before it)."""
    read = getattr(stream, "read1", stream.read)
    carry = b""
    while True:
        data = read(READ_BYTES)
        if not data:
            break
        block = carry + data
        lines = block.split(b"\n")
        carry = lines.pop()
        if lines:
            yield [line.rstrip(b"\r") for line in lines] if b"\r" in block else lines
    if carry:
        yield [carry.rstrip(b"\r")]
