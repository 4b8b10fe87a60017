"""One Kafka transaction over the wire protocol (KIP-98), for the transactions librdkafka cannot
write as they are: those holding a record with timestamp 0 (librdkafka stamps it with the send
time). Records and a group's offsets commit together, as with sendOffsetsToTransaction. The
caller's transactional id is used, so its InitProducerId fences the caller's librdkafka producer
(kstool.kafka.transactions makes a new one afterwards): one writer per id at a time."""

from __future__ import annotations

import struct
from typing import Callable

from kstool.config import ClientConfig
from kstool.kafka.exceptions import KafkaOperationError
from kstool.kafka.wire.codec import Reader, encode_string
from kstool.kafka.wire.protocol import (
    GROUP_KEY,
    TRANSACTION_KEY,
    Coordinated,
    LeaderWrites,
    Record,
    record_batch,
)

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
BATCH_RECORDS, BATCH_BYTES = 1000, 512 * 1024  # well under every broker's default size limit
# A transaction holds a whole micro-batch (up to --max-records-per-batch), so not Kafka Streams'
# 10 s (its transactions last one 100 ms commit interval): librdkafka also gives each record of
# the transaction this long to be delivered, and 10 s aborted batches on a busy machine.
TRANSACTION_TIMEOUT_MS = 60_000

TopicPartition = tuple[str, int]


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _single_error(reply: Reader) -> list[int]:
    reply.take(">i")  # throttle
    return [reply.take(">h")]


def _partition_errors(reply: Reader) -> list[int]:
    reply.take(">i")  # throttle
    codes = []
    for _ in range(reply.take(">i")):
        reply.string()
        for _ in range(reply.take(">i")):
            reply.take(">i")
            codes.append(reply.take(">h"))
    return codes


def _by_topic(partitions: list[TopicPartition], encode_partition: Callable[[TopicPartition], bytes]) -> bytes:
    topics: dict[str, list[TopicPartition]] = {}
    for tp in sorted(partitions):
        topics.setdefault(tp[0], []).append(tp)
    return struct.pack(">i", len(topics)) + b"".join(
        encode_string(topic) + struct.pack(">i", len(tps)) + b"".join(map(encode_partition, tps))
        for topic, tps in topics.items())


def _chunks(records: list[Record], single_record_tail: bool) -> list[list[Record]]:
    """Record batches of bounded size; with `single_record_tail` the last record goes alone
    (the embedded broker's high watermark is right only after a single-record batch)."""
    body, tail = (records[:-1], records[-1:]) if single_record_tail else (records, [])
    chunks: list[list[Record]] = []
    size = 0
    for record in body:
        record_size = len(record[0] or b"") + len(record[1] or b"") + 32
        if not chunks or len(chunks[-1]) >= BATCH_RECORDS or size + record_size > BATCH_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(record)
        size += record_size
    return chunks + ([tail] if tail else [])


def commit_transaction(config: ClientConfig, transactional_id: str,
                       leaders: Callable[[str, int], tuple[str, int]],
                       records: dict[TopicPartition, list[Record]], group: str,
                       offsets: dict[TopicPartition, int], single_record_tail: bool = False) -> None:
    """Write `records` and commit `offsets` for `group` in one transaction, or abort it and
    raise KafkaOperationError."""
    txn = Coordinated(config, transactional_id, TRANSACTION_KEY)
    producer_id = epoch = -1
    started = False
    try:
        def take_producer_id(reply: Reader) -> list[int]:
            nonlocal producer_id, epoch
            reply.take(">i")
            error = reply.take(">h")
            producer_id, epoch = reply.take(">q"), reply.take(">h")
            return [error]

        # v4 (KIP-360: producer id and epoch -1 for a first init), the version the broker needs
        tid = transactional_id.encode("utf-8")
        txn.call(INIT_PRODUCER_ID, 4, _uvarint(len(tid) + 1) + tid
                 + struct.pack(">iqhb", TRANSACTION_TIMEOUT_MS, -1, -1, 0), take_producer_id, flexible=True)
        head = encode_string(transactional_id) + struct.pack(">qh", producer_id, epoch)
        started = True
        written = [tp for tp, rs in records.items() if rs]
        if written:
            txn.call(ADD_PARTITIONS_TO_TXN, 1,
                     head + _by_topic(written, lambda tp: struct.pack(">i", tp[1])), _partition_errors)
            _produce_all(config, transactional_id, leaders, records, (producer_id, epoch), single_record_tail)
        if offsets:
            txn.call(ADD_OFFSETS_TO_TXN, 1, head + encode_string(group), _single_error)
            body = (encode_string(transactional_id) + encode_string(group)
                    + struct.pack(">qh", producer_id, epoch)
                    + _by_topic(list(offsets), lambda tp: struct.pack(">iq", tp[1], offsets[tp])
                                + encode_string(None)))
            Coordinated(config, group, GROUP_KEY).call(TXN_OFFSET_COMMIT, 1, body, _partition_errors)
        txn.call(END_TXN, 1, head + struct.pack(">b", 1), _single_error)
    except (KafkaOperationError, OSError, struct.error) as exc:
        if started:
            try:
                txn.call(END_TXN, 1, head + struct.pack(">b", 0), _single_error)
            except (KafkaOperationError, OSError, struct.error):
                pass  # the coordinator aborts it at the transaction timeout
        raise KafkaOperationError(f"transaction aborted: {exc}") from None
    finally:
        txn.close()


def _produce_all(config: ClientConfig, transactional_id: str,
                 leaders: Callable[[str, int], tuple[str, int]],
                 records: dict[TopicPartition, list[Record]], producer: tuple[int, int],
                 single_record_tail: bool) -> None:
    # a batch sent again after a lost connection is written once: the broker knows its sequence
    writes = LeaderWrites(config, leaders, transactional_id, resend_if_unknown=True)
    try:
        for (topic, partition), partition_records in sorted(records.items()):
            sequence = 0  # a new epoch starts every partition's sequence at 0
            for chunk in _chunks(partition_records, single_record_tail):
                writes.write(topic, partition, record_batch(chunk, (*producer, sequence), transactional=True))
                sequence += len(chunk)
    finally:
        writes.close()
