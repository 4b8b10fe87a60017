"""A minimal Kafka wire-protocol client for what librdkafka cannot do: removing members from a
consumer group (LeaveGroup v3, KIP-345), as Kafka's reset tool does with --force, and writing a
record whose timestamp is 0 (librdkafka stamps such a record with the send time; Produce v3 with
a magic-2 record batch keeps it). PLAINTEXT and SSL listeners; SASL is not spoken here."""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Callable

from kstool.config import ClientConfig
from kstool.kafka.exceptions import KafkaOperationError

PRODUCE, FIND_COORDINATOR, LEAVE_GROUP = 0, 10, 13
_ERRORS = {15: "coordinator not available", 16: "not coordinator", 25: "unknown member id",
           69: "member id required", 79: "group id not found"}


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
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


class _Connection:
    def __init__(self, host: str, port: int, config: ClientConfig):
        protocol = config.common.get("security.protocol", "plaintext").lower()
        if not speaks_to(config):
            raise KafkaOperationError(
                "removing group members (--force) needs a PLAINTEXT or SSL listener; with SASL, "
                "stop the application instances or wait for their session timeout")
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

    def call(self, api_key: int, version: int, body: bytes) -> _Reader:
        self.correlation += 1
        header = struct.pack(">hhi", api_key, version, self.correlation) + _string("kstool")
        payload = header + body
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._read(4))[0]
        reader = _Reader(self._read(size))
        reader.take(">i")  # correlation id
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


def _bootstrap(config: ClientConfig) -> tuple[str, int]:
    first = config.bootstrap_servers.split(",")[0].strip()
    first = first.split("://", 1)[-1]
    host, _, port = first.rpartition(":")
    return host.strip("[]"), int(port)


def leave_group(config: ClientConfig, group: str, member_ids: list[str]) -> None:
    """Remove the given members from the group; raises with the broker's reason on failure."""
    try:
        conn = _Connection(*_bootstrap(config), config)
        try:
            found = conn.call(FIND_COORDINATOR, 1, _string(group) + struct.pack(">b", 0))
            found.take(">i")
            error = found.take(">h")
            found.string()
            found.take(">i")
            host, port = found.string(), found.take(">i")
        finally:
            conn.close()
        if error:
            raise KafkaOperationError(f"cannot find the coordinator of {group!r}: "
                                      f"{_ERRORS.get(error, f'error {error}')}")
        conn = _Connection(host, port, config)
        try:
            body = _string(group) + struct.pack(">i", len(member_ids))
            body += b"".join(_string(m) + _string(None) for m in member_ids)
            reply = conn.call(LEAVE_GROUP, 3, body)
            reply.take(">i")
            error = reply.take(">h")
            failed = []
            for _ in range(reply.take(">i")):
                member = reply.string()
                reply.string()  # group instance id
                member_error = reply.take(">h")
                if member_error:
                    failed.append(f"{member}: {_ERRORS.get(member_error, f'error {member_error}')}")
        finally:
            conn.close()
    except (OSError, struct.error) as exc:
        raise KafkaOperationError(f"removing members of {group!r} failed: {exc}") from None
    if error or failed:
        reason = _ERRORS.get(error, f"error {error}") if error else "; ".join(failed)
        raise KafkaOperationError(f"removing members of {group!r} failed: {reason}")


# -- Produce: one record per request, for records librdkafka would restamp ---------------------

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


def record_batch(key: bytes | None, value: bytes | None, timestamp: int,
                 headers: list[tuple[str, bytes | None]]) -> bytes:
    """A magic-2 record batch holding one record (CreateTime, no compression, no producer id)."""
    body = (b"\0" + _varint(0) + _varint(0) + _sized(key) + _sized(value) + _varint(len(headers))
            + b"".join(_sized(name.encode("utf-8")) + _sized(data) for name, data in headers))
    record = _varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, 0, timestamp, timestamp, -1, -1, -1, 1) + record
    after_length = struct.pack(">ibI", -1, 2, crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_length)) + after_length


class RecordWriter:
    """Writes single records to partition leaders over the wire protocol (acks=all), reusing
    one connection per broker."""

    def __init__(self, config: ClientConfig, leaders: Callable[[str, int], tuple[str, int]]):
        self.config = config
        self.leaders = leaders
        self.connections: dict[tuple[str, int], _Connection] = {}
        self.addresses: dict[tuple[str, int], tuple[str, int]] = {}  # partition -> its leader

    def write(self, topic: str, partition: int, key: bytes | None, value: bytes | None, timestamp: int,
              headers: list[tuple[str, bytes | None]]) -> None:
        if (topic, partition) not in self.addresses:
            self.addresses[(topic, partition)] = self.leaders(topic, partition)
        address = self.addresses[(topic, partition)]
        try:
            if address not in self.connections:
                self.connections[address] = _Connection(*address, self.config)
            batch = record_batch(key, value, timestamp, headers)
            body = (_string(None) + struct.pack(">hi", -1, int(self.config.timeout_s * 1000))
                    + struct.pack(">i", 1) + _string(topic)
                    + struct.pack(">i", 1) + struct.pack(">ii", partition, len(batch)) + batch)
            reply = self.connections[address].call(PRODUCE, 3, body)
            reply.take(">i")  # topics
            reply.string()
            reply.take(">i")  # partitions
            reply.take(">i")
            error = reply.take(">h")
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
