"""A minimal Kafka wire-protocol client for what librdkafka cannot do: removing members from a
consumer group (LeaveGroup v3, KIP-345), as Kafka's reset tool does with --force, and writing
records whose timestamp is 0 (librdkafka stamps such a record with the send time; Produce v3
with a magic-2 record batch keeps it), alone here or in a transaction (kstool.kafka.wire_transaction).
PLAINTEXT and SSL listeners; SASL is not spoken here."""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any, Callable

from kstool.config import ClientConfig
from kstool.kafka.exceptions import KafkaOperationError

PRODUCE, FIND_COORDINATOR, LEAVE_GROUP = 0, 10, 13
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types
ERRORS = {14: "coordinator loading", 15: "coordinator not available", 16: "not coordinator",
          25: "unknown member id", 47: "producer fenced (invalid epoch)",
          48: "invalid transaction state", 51: "concurrent transactions", 69: "member id required",
          79: "group id not found", 90: "producer fenced"}


def error_name(code: int) -> str:
    return ERRORS.get(code, f"error {code}")


def encode_string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


class Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> Any:
        value = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value[0]

    def string(self) -> str | None:
        length = self.take(">h")
        if length < 0:
            return None
        value = self.data[self.pos:self.pos + length].decode("utf-8")
        self.pos += length
        return value


def speaks_to(config: ClientConfig) -> bool:
    """Whether this client can connect with the configured security protocol."""
    return not config.common.get("security.protocol", "plaintext").lower().startswith("sasl")


class Connection:
    def __init__(self, host: str, port: int, config: ClientConfig):
        protocol = config.common.get("security.protocol", "plaintext").lower()
        if not speaks_to(config):
            raise KafkaOperationError("kstool's own Kafka client needs a PLAINTEXT or SSL listener")
        sock = socket.create_connection((host, port), timeout=config.timeout_s)
        if protocol == "ssl":
            context = ssl.create_default_context(cafile=config.common.get("ssl.ca.location"))
            if config.common.get("ssl.certificate.location"):
                context.load_cert_chain(config.common["ssl.certificate.location"],
                                        config.common.get("ssl.key.location"),
                                        config.common.get("ssl.key.password"))
            sock = context.wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self.correlation = 0

    def call(self, api_key: int, version: int, body: bytes, flexible: bool = False) -> Reader:
        """One request; `flexible`: a KIP-482 version (headers carry empty tagged fields)."""
        self.correlation += 1
        header = struct.pack(">hhi", api_key, version, self.correlation) + encode_string("kstool")
        payload = header + (b"\0" if flexible else b"") + body
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._read(4))[0]
        reader = Reader(self._read(size))
        reader.take(">i")  # correlation id
        if flexible:
            reader.take(">b")  # no tagged fields are asked for, so none come back
        return reader

    def _read(self, n: int) -> bytes:
        chunks, remaining = [], n
        while remaining:
            chunk = self.sock.recv(remaining)
            if not chunk:
                raise KafkaOperationError("the broker closed the connection")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


def bootstrap_address(config: ClientConfig) -> tuple[str, int]:
    return config.bootstrap_addresses()[0]


def find_coordinator(config: ClientConfig, key: str, key_type: int) -> tuple[int, str, int]:
    """(error code, host, port) of the group's or transactional id's coordinator."""
    conn = Connection(*bootstrap_address(config), config)
    try:
        found = conn.call(FIND_COORDINATOR, 1, encode_string(key) + struct.pack(">b", key_type))
        found.take(">i")  # throttle
        error = found.take(">h")
        found.string()
        found.take(">i")  # node id
        return error, found.string() or "", found.take(">i")
    finally:
        conn.close()


def leave_group(config: ClientConfig, group: str, member_ids: list[str]) -> None:
    """Remove the given members from the group; raises with the broker's reason on failure."""
    if not speaks_to(config):
        raise KafkaOperationError(
            "removing group members (--force) needs a PLAINTEXT or SSL listener; with SASL, "
            "stop the application instances or wait for their session timeout")
    try:
        error, host, port = find_coordinator(config, group, GROUP_KEY)
        if error:
            raise KafkaOperationError(f"cannot find the coordinator of {group!r}: {error_name(error)}")
        conn = Connection(host, port, config)
        try:
            body = encode_string(group) + struct.pack(">i", len(member_ids))
            body += b"".join(encode_string(m) + encode_string(None) for m in member_ids)
            reply = conn.call(LEAVE_GROUP, 3, body)
            reply.take(">i")
            error = reply.take(">h")
            failed = []
            for _ in range(reply.take(">i")):
                member = reply.string()
                reply.string()  # group instance id
                member_error = reply.take(">h")
                if member_error:
                    failed.append(f"{member}: {error_name(member_error)}")
        finally:
            conn.close()
    except (OSError, struct.error) as exc:
        raise KafkaOperationError(f"removing members of {group!r} failed: {exc}") from None
    if error or failed:
        reason = error_name(error) if error else "; ".join(failed)
        raise KafkaOperationError(f"removing members of {group!r} failed: {reason}")


# -- Produce: record batches that keep the timestamps librdkafka would restamp -------------

def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum of Kafka's record batches."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _sized(data: bytes | None) -> bytes:
    return _varint(-1) if data is None else _varint(len(data)) + data


# (key, value, timestamp ms, [(header name, header value)])
Record = tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]
NO_PRODUCER = (-1, -1, -1)  # (producer id, epoch, base sequence) of a non-idempotent write
TRANSACTIONAL = 0x10  # record batch attribute bit


def record_batch(records: list[Record], producer: tuple[int, int, int] = NO_PRODUCER,
                 transactional: bool = False) -> bytes:
    """A magic-2 record batch (CreateTime, no compression); timestamps are kept as given."""
    base = records[0][2]
    encoded = []
    for delta, (key, value, timestamp, headers) in enumerate(records):
        body = (b"\0" + _varint(timestamp - base) + _varint(delta) + _sized(key) + _sized(value)
                + _varint(len(headers))
                + b"".join(_sized(name.encode("utf-8")) + _sized(data) for name, data in headers))
        encoded.append(_varint(len(body)) + body)
    producer_id, epoch, sequence = producer
    after_crc = struct.pack(">hiqqqhii", TRANSACTIONAL if transactional else 0, len(records) - 1,
                            base, max(r[2] for r in records), producer_id, epoch, sequence,
                            len(records)) + b"".join(encoded)
    after_length = struct.pack(">ibI", -1, 2, crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_length)) + after_length


def produce(conn: Connection, transactional_id: str | None, timeout_ms: int, topic: str,
            partition: int, batch: bytes) -> int:
    """Write one record batch to one partition (acks=all); returns the broker's error code."""
    body = (encode_string(transactional_id) + struct.pack(">hi", -1, timeout_ms)
            + struct.pack(">i", 1) + encode_string(topic)
            + struct.pack(">i", 1) + struct.pack(">ii", partition, len(batch)) + batch)
    reply = conn.call(PRODUCE, 3, body)
    reply.take(">i")  # topics
    reply.string()
    reply.take(">i")  # partitions
    reply.take(">i")
    return int(reply.take(">h"))


class RecordWriter:
    """Writes single records to partition leaders over the wire protocol (acks=all), reusing
    one connection per broker."""

    def __init__(self, config: ClientConfig, leaders: Callable[[str, int], tuple[str, int]]):
        self.config = config
        self.leaders = leaders
        self.connections: dict[tuple[str, int], Connection] = {}
        self.addresses: dict[tuple[str, int], tuple[str, int]] = {}  # partition -> its leader

    def write(self, topic: str, partition: int, key: bytes | None, value: bytes | None, timestamp: int,
              headers: list[tuple[str, bytes | None]]) -> None:
        if (topic, partition) not in self.addresses:
            self.addresses[(topic, partition)] = self.leaders(topic, partition)
        address = self.addresses[(topic, partition)]
        try:
            if address not in self.connections:
                self.connections[address] = Connection(*address, self.config)
            batch = record_batch([(key, value, timestamp, headers)])
            error = produce(self.connections[address], None, int(self.config.timeout_s * 1000),
                            topic, partition, batch)
        except (OSError, struct.error) as exc:
            self.connections.pop(address, None)
            self.addresses.pop((topic, partition), None)
            raise KafkaOperationError(f"writing to {topic}:{partition} failed: {exc}") from None
        if error:
            self.addresses.pop((topic, partition), None)  # e.g. not the leader any more
            raise KafkaOperationError(f"writing to {topic}:{partition} failed: broker error {error}")

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()
        self.connections.clear()
