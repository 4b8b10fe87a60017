"""A test-side read_committed reader that applies Kafka's isolation rules itself, for brokers
that do not (the embedded one returns aborted records to read_committed fetches, with no
aborted-transactions list). Independent of kstool's code: raw Fetch v4 requests over a socket,
record batches parsed by kafka-python.

The rules (KIP-98; Kafka's own consumer: Fetcher's CompletedFetch#nextFetchedRecord): a
transactional batch's records become visible when its producer's transaction ends with a
COMMIT control record, and are dropped when it ends with ABORT; records of a transaction with
no marker yet are not visible, nor is any record after its first (the last stable offset
stops before it). Control records are never returned.

On a broker that applies them itself (Apache Kafka), the records a test checks are what a plain
confluent-kafka consumer at isolation.level=read_committed reads, and the scan must agree."""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient
from kafka.record import MemoryRecords

from tests.helpers import read_all

FETCH, FETCH_VERSION = 1, 4  # v4: the first with isolation_level and record batches v2
READ_UNCOMMITTED = 0  # everything in the log: the isolation is applied here
MAX_BYTES = 8 * 1024 * 1024
FETCH_WAIT_MS = 500
# a partition a moment after its topic was created: the metadata names its leader before that
# broker's replica manager leads it (NOT_LEADER_OR_FOLLOWER seen on one node), so ask again
BECOMING_LEADER = {3, 5, 6}  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER
LEADER_WAIT_S = 10


@dataclass(frozen=True)
class Visible:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


@dataclass
class LogScan:
    """What one partition's log holds, seen as a read_committed reader and as a broker admin."""

    records: list[Visible] = field(default_factory=list)  # committed or non-transactional
    commits: int = 0  # COMMIT markers seen
    aborts: int = 0  # ABORT markers seen
    aborted_records: int = 0  # data records of aborted transactions
    open_records: int = 0  # data records of transactions without a marker yet
    producers: set[int] = field(default_factory=set)  # ids of the producers of its transactional records
    data_batches: int = 0  # record batches other than control batches


def read_committed(kafka, topic: str) -> tuple[list[Visible], list[LogScan]]:
    """Every visible record of the topic, per partition in offset order, and each partition's scan."""
    metadata = AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(topic, timeout=10)
    brokers = {b.id: (b.host, b.port) for b in metadata.brokers.values()}
    scans = []
    for partition, info in sorted(metadata.topics[topic].partitions.items()):
        scans.append(_scan(brokers[info.leader], topic, partition))
    scanned = [r for scan in scans for r in scan.records]
    if kafka.embedded:
        return scanned, scans
    consumed = [Visible(m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1])
                for m in read_all(kafka, topic)]  # librdkafka's default isolation: read_committed
    assert consumed == scanned, f"{topic}: a read_committed consumer and the log scan disagree"
    return consumed, scans


class LogWatch:
    """Tells when data records (uncommitted ones too, not transaction markers) are appended to
    a topic after the watch began: a Fetch from each partition's end answers as soon as one
    is (a long poll), whatever high watermark the broker reports."""

    def __init__(self, bootstrap: str, topic: str):
        metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
        brokers = {b.id: (b.host, b.port) for b in metadata.brokers.values()}
        self.topic = topic
        self.partitions = {p: socket.create_connection(brokers[info.leader], timeout=30)
                           for p, info in metadata.topics[topic].partitions.items()}
        self.ends = {p: self._end(conn, p) for p, conn in self.partitions.items()}

    def _end(self, conn: socket.socket, partition: int) -> int:
        offset = 0
        for batch in _log(conn, self.topic, partition):
            offset = batch.next_offset
        return offset

    def grew(self) -> bool:
        for partition, conn in self.partitions.items():
            batches, _ = _fetch(conn, self.topic, partition, self.ends[partition])
            if any(not batch.is_control_batch for batch in batches):
                return True
            if batches:
                self.ends[partition] = batches[-1].next_offset
        return False

    def close(self) -> None:
        for conn in self.partitions.values():
            conn.close()


def _scan(address: tuple[str, int], topic: str, partition: int) -> LogScan:
    scan = LogScan()
    pending: dict[int, list[Visible]] = {}  # producer id -> records of its open transaction
    with socket.create_connection(address, timeout=30) as conn:
        for batch in _log(conn, topic, partition):
            if batch.is_control_batch:
                for control in batch:
                    held = pending.pop(batch.producer_id, [])
                    if control.commit:
                        scan.commits += 1
                        scan.records += held
                    else:
                        scan.aborts += 1
                        scan.aborted_records += len(held)
                continue
            records = [Visible(partition, r.offset, r.key, r.value, r.timestamp) for r in batch]
            scan.data_batches += 1
            if batch.is_transactional:
                pending.setdefault(batch.producer_id, []).extend(records)
                scan.producers.add(batch.producer_id)
            else:
                scan.records += records
    scan.open_records = sum(len(held) for held in pending.values())
    # the last stable offset: nothing from an open transaction's first record on is visible
    stable_end = min((held[0].offset for held in pending.values() if held), default=None)
    scan.records = sorted((r for r in scan.records if stable_end is None or r.offset < stable_end),
                          key=lambda r: r.offset)
    return scan


def _log(conn: socket.socket, topic: str, partition: int):
    """Every record batch of the partition, in offset order."""
    offset, empty = 0, 0
    while True:
        batches, high_watermark = _fetch(conn, topic, partition, offset)
        if not batches:
            if offset >= high_watermark:
                return
            empty += 1
            assert empty < 60, f"{topic}:{partition}: no records at {offset}, below the high watermark {high_watermark}"
            continue
        empty = 0
        yield from batches
        offset = batches[-1].next_offset


def _fetch(conn: socket.socket, topic: str, partition: int, offset: int) -> tuple[list, int]:
    """The record batches from `offset`, and the high watermark. No batches below the high
    watermark is no end: the embedded broker answers empty when its wait runs out before it
    gathered many small batches (it may also report the watermark too low: the caller reads
    on until an empty answer at or past it)."""
    deadline = time.monotonic() + LEADER_WAIT_S
    while True:
        error, answer = _fetch_once(conn, topic, partition, offset)
        if error not in BECOMING_LEADER or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if error == 1:  # OFFSET_OUT_OF_RANGE: past the end
        return [], offset
    assert error == 0, f"fetch {topic}:{partition}@{offset}: error {error}"
    return answer


def _fetch_once(conn: socket.socket, topic: str, partition: int, offset: int) -> tuple[int, tuple[list, int]]:
    """The partition's error code, and its batches from `offset` and high watermark when it has none."""
    name = topic.encode()
    body = struct.pack(">iiiib", -1, FETCH_WAIT_MS, 1, MAX_BYTES, READ_UNCOMMITTED)
    body += struct.pack(">ih", 1, len(name)) + name + struct.pack(">iiqi", 1, partition, offset, MAX_BYTES)
    header = struct.pack(">hhih", FETCH, FETCH_VERSION, 1, 4) + b"test"
    request = header + body
    conn.sendall(struct.pack(">i", len(request)) + request)
    response = _receive(conn)
    at = 4 + 4  # correlation id, throttle time
    (topics,) = struct.unpack_from(">i", response, at)
    at += 4
    assert topics == 1, topics
    (name_length,) = struct.unpack_from(">h", response, at)
    at += 2 + name_length
    (partitions,) = struct.unpack_from(">i", response, at)
    at += 4
    assert partitions == 1, partitions
    _, error, high_watermark, _ = struct.unpack_from(">ihqq", response, at)
    at += 4 + 2 + 8 + 8
    if error != 0:
        return error, ([], high_watermark)
    (aborted,) = struct.unpack_from(">i", response, at)
    at += 4 + max(aborted, 0) * 16
    (size,) = struct.unpack_from(">i", response, at)
    at += 4
    records = MemoryRecords(bytes(response[at:at + max(size, 0)]))
    batches = []
    while (batch := records.next_batch()) is not None:
        if batch.next_offset > offset:  # a batch may start before the asked offset
            batches.append(batch)
    return 0, (batches, high_watermark)


def _receive(conn: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _exactly(conn, 4))
    return _exactly(conn, size)


def _exactly(conn: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return bytes(data)
