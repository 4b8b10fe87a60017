"""A minimal Kafka wire-protocol client for what librdkafka cannot do: removing members from a
consumer group (LeaveGroup v3, KIP-345), as Kafka's reset tool does with --force, and writing
records whose timestamp is 0 (librdkafka stamps such a record with the send time; Produce v3
with a magic-2 record batch keeps it), alone here or in a transaction (kstool.kafka.wire.transaction).
PLAINTEXT, SSL (a client certificate too) and SASL listeners (PLAIN, SCRAM, OAUTHBEARER: kstool.kafka.wire.sasl)."""

from __future__ import annotations

import os
import select
import socket
import ssl
import struct
import time
from typing import Callable, Iterator

from confluent_kafka import KafkaError

from kstool.config import ClientConfig
from kstool.kafka.exceptions import KafkaOperationError
from kstool.kafka.wire.codec import Reader, encode_string, varint
from kstool.kafka.wire.sasl import MECHANISMS, authenticate

PRODUCE, FIND_COORDINATOR, LEAVE_GROUP = 0, 10, 13
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types
# the coordinator moved, is loading or not elected yet, or a transaction is still ending: ask again
COORDINATOR_LOADING, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS = 14, 15, 16, 51
COORDINATOR_RETRIABLE = {COORDINATOR_LOADING, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS}
# the partition's leader moved or is being elected: the write was not taken, send it to the new one
LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER = 5, 6
LEADER_RETRIABLE = {LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER}


class ConnectionLost(KafkaOperationError):
    """The broker closed the connection mid-request (a node stopping or lost)."""


class CoordinatorRefused(KafkaOperationError):
    """A coordinator's lasting error (or FindCoordinator's), by its code."""

    def __init__(self, code: int):
        super().__init__(error_name(code))
        self.code = code


def error_name(code: int) -> str:
    """A broker's error code in words, as librdkafka names it ("NOT_COORDINATOR: Not coordinator")."""
    err = KafkaError(code)
    return f"{err.name()}: {err.str().removeprefix('Broker: ')}"


def _mechanism(config: ClientConfig) -> str:
    common = config.common
    return (common.get("sasl.mechanism") or common.get("sasl.mechanisms") or "GSSAPI").upper()


def speaks_to(config: ClientConfig) -> bool:
    """Whether this client can connect with the configured security settings."""
    return _unspoken(config) is None


def _unspoken(config: ClientConfig) -> str | None:
    """Why this client cannot connect with the configured settings, or None."""
    if "ssl.certificate.pem" in config.base() and not hasattr(os, "memfd_create"):
        return "it presents a client certificate from memory on Linux only"
    protocol = config.common.get("security.protocol", "plaintext").lower()
    if protocol.startswith("sasl") and _mechanism(config) not in MECHANISMS:
        return f"it speaks SASL {', '.join(MECHANISMS)}, not {_mechanism(config)}"
    return None


class Connection:
    def __init__(self, host: str, port: int, config: ClientConfig):
        protocol = config.common.get("security.protocol", "plaintext").lower()
        unspoken = _unspoken(config)
        if unspoken:
            raise KafkaOperationError(f"kstool's own Kafka client cannot connect: {unspoken}")
        sock = socket.create_connection((host, port), timeout=config.timeout_s)
        if protocol in ("ssl", "sasl_ssl"):
            sock = _tls_context(config).wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self.correlation = 0
        if protocol.startswith("sasl"):
            try:
                authenticate(self, _mechanism(config), config.common, config.timeout_s)
            except BaseException:
                self.close()
                raise

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
                raise ConnectionLost("the broker closed the connection")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def closed_by_peer(self) -> bool:
        """The broker ended this idle connection (it stopped): Kafka sends nothing unasked, so
        anything readable between requests is its end, and a request sent now would be lost."""
        return bool(select.select([self.sock], [], [], 0)[0])

    def close(self) -> None:
        self.sock.close()


def _tls_context(config: ClientConfig) -> ssl.SSLContext:
    settings = config.base()
    context = ssl.create_default_context(cafile=settings.get("ssl.ca.location"), cadata=settings.get("ssl.ca.pem"))
    if settings.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
        context.check_hostname = False
    if settings.get("ssl.certificate.location"):
        context.load_cert_chain(settings["ssl.certificate.location"], settings.get("ssl.key.location"),
                                settings.get("ssl.key.password"))
    elif settings.get("ssl.certificate.pem"):
        _load_pem_chain(context, settings["ssl.certificate.pem"], settings.get("ssl.key.pem", ""),
                        settings.get("ssl.key.password"))
    return context


def _load_pem_chain(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """A client certificate and key held in memory (a JKS or PKCS12 keystore's): Python's ssl
    loads them from a file name only, so from an anonymous in-memory file, never from disk."""
    fd = os.memfd_create("kstool-client-certificate")
    try:
        os.write(fd, (chain + key).encode())
        context.load_cert_chain(f"/proc/self/fd/{fd}", password=password)
    finally:
        os.close(fd)


def any_bootstrap(config: ClientConfig) -> Connection:
    """A connection to the first bootstrap address that takes one: on a cluster, a node that is
    down must not stop a request that any other node can answer."""
    addresses = config.bootstrap_addresses()
    for address in addresses[:-1]:
        try:
            return Connection(*address, config)
        except OSError:
            continue
    return Connection(*addresses[-1], config)


def find_coordinator(config: ClientConfig, key: str, key_type: int) -> tuple[int, str, int]:
    """(error code, host, port) of the group's or transactional id's coordinator."""
    conn = any_bootstrap(config)
    try:
        found = conn.call(FIND_COORDINATOR, 1, encode_string(key) + struct.pack(">b", key_type))
        found.take(">i")  # throttle
        error = found.take(">h")
        found.string()
        found.take(">i")  # node id
        return error, found.string() or "", found.take(">i")
    finally:
        conn.close()


def retry_delays(timeout_s: float) -> Iterator[None]:
    """Sleeps between attempts (50 ms doubling to 1 s) until `timeout_s` has passed; the caller
    tries once more after each."""
    deadline, delay = time.monotonic() + timeout_s, 0.05
    while time.monotonic() < deadline:
        time.sleep(delay)
        yield
        delay = min(delay * 2, 1.0)


class Coordinated:
    """Requests to the coordinator of one group or transactional id, asked again while the
    coordinator moves, loads or is unreachable (a node lost: found again through any bootstrap
    address), for the client's timeout (30 s at least: a lost node's coordinators move after
    its session times out, 9 s by default)."""

    def __init__(self, config: ClientConfig, key: str, key_type: int):
        self.config, self.key, self.key_type = config, key, key_type
        self.conn: Connection | None = None

    def call(self, api_key: int, version: int, body: bytes, errors: Callable[[Reader], list[int]],
             flexible: bool = False) -> Reader:
        """The reply, once `errors` (reading it) finds none; raises with the first lasting one."""
        retries = retry_delays(max(self.config.timeout_s, 30))
        while True:
            try:
                reply, codes = self._ask(api_key, version, body, errors, flexible)
            except (OSError, ConnectionLost) as lost:  # the coordinator's node went away
                self.close()
                if next(retries, StopIteration) is StopIteration:
                    raise KafkaOperationError(f"the coordinator of {self.key!r} is unreachable: {lost}") from None
                continue
            if not codes:
                return reply
            if not set(codes) <= COORDINATOR_RETRIABLE or next(retries, StopIteration) is StopIteration:
                raise CoordinatorRefused(codes[0])
            if codes[0] != CONCURRENT_TRANSACTIONS:
                self.close()

    def _ask(self, api_key: int, version: int, body: bytes, errors: Callable[[Reader], list[int]],
             flexible: bool) -> tuple[Reader, list[int]]:
        if self.conn is None:
            error, host, port = find_coordinator(self.config, self.key, self.key_type)
            if error:
                return Reader(b""), [error]
            self.conn = Connection(host, port, self.config)
        reply = self.conn.call(api_key, version, body, flexible)
        return reply, [c for c in errors(reply) if c]

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def leave_group(config: ClientConfig, group: str, member_ids: list[str]) -> None:
    """Remove the given members from the group; raises with the broker's reason on failure."""
    unspoken = _unspoken(config)
    if unspoken:
        raise KafkaOperationError(
            f"removing group members (--force) is kstool's own client's, and {unspoken}; "
            "stop the application instances or wait for their session timeout")
    failed: list[str] = []

    def errors(reply: Reader) -> list[int]:
        reply.take(">i")  # throttle
        error = reply.take(">h")
        failed.clear()
        for _ in range(reply.take(">i")):
            member = reply.string()
            reply.string()  # group instance id
            member_error = reply.take(">h")
            if member_error:
                failed.append(f"{member}: {error_name(member_error)}")
        return [error]

    coordinator = Coordinated(config, group, GROUP_KEY)
    body = encode_string(group) + struct.pack(">i", len(member_ids))
    body += b"".join(encode_string(m) + encode_string(None) for m in member_ids)
    try:
        coordinator.call(LEAVE_GROUP, 3, body, errors)
    except (KafkaOperationError, OSError, struct.error) as exc:
        raise KafkaOperationError(f"removing members of {group!r} failed: {exc}") from None
    finally:
        coordinator.close()
    if failed:
        raise KafkaOperationError(f"removing members of {group!r} failed: {'; '.join(failed)}")


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


def _sized(data: bytes | None) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


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
        body = (b"\0" + varint(timestamp - base) + varint(delta) + _sized(key) + _sized(value)
                + varint(len(headers))
                + b"".join(_sized(name.encode("utf-8")) + _sized(data) for name, data in headers))
        encoded.append(varint(len(body)) + body)
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


class LeaderWrites:
    """Record batches written to partition leaders (acks=all), one connection per broker. While
    a leader moves (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, its node unreachable) the batch
    goes to the leader the metadata names next, for the client's timeout (30 s at least: a lost
    node's leaderships move after its session times out). A connection lost after the batch was
    sent leaves it unknown whether it was written: sent again only when `resend_if_unknown`
    (an idempotent or transactional batch, which the broker deduplicates by its sequence)."""

    def __init__(self, config: ClientConfig, leaders: Callable[[str, int], tuple[str, int]],
                 transactional_id: str | None = None, resend_if_unknown: bool = False):
        self.config, self.leaders = config, leaders
        self.transactional_id, self.resend_if_unknown = transactional_id, resend_if_unknown
        self.connections: dict[tuple[str, int], Connection] = {}
        self.addresses: dict[tuple[str, int], tuple[str, int]] = {}  # partition -> its leader

    def write(self, topic: str, partition: int, batch: bytes) -> None:
        retries = retry_delays(max(self.config.timeout_s, 30))
        while True:
            address = self.addresses.get((topic, partition))
            if address is None:
                address = self.addresses[(topic, partition)] = self.leaders(topic, partition)
            sent, reason = False, ""
            if address in self.connections and self.connections[address].closed_by_peer():
                self._drop(address)
            try:
                if address not in self.connections:
                    self.connections[address] = Connection(*address, self.config)
                sent = True
                error = produce(self.connections[address], self.transactional_id, int(self.config.timeout_s * 1000),
                                topic, partition, batch)
                if not error:
                    return
                reason = error_name(error)
                retriable = error in LEADER_RETRIABLE
            except (OSError, ConnectionLost, struct.error) as lost:
                reason, retriable = str(lost), not sent or self.resend_if_unknown
                self._drop(address)
            self.addresses.pop((topic, partition), None)
            if not retriable or next(retries, StopIteration) is StopIteration:
                raise KafkaOperationError(f"writing to {topic}:{partition} failed: {reason}")

    def _drop(self, address: tuple[str, int]) -> None:
        conn = self.connections.pop(address, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()
        self.connections.clear()


class RecordWriter:
    """Writes single records to partition leaders over the wire protocol (acks=all): not
    idempotent, so a record whose write is unknown (the connection lost after sending) fails."""

    def __init__(self, config: ClientConfig, leaders: Callable[[str, int], tuple[str, int]]):
        self.writes = LeaderWrites(config, leaders)

    def write(self, topic: str, partition: int, key: bytes | None, value: bytes | None, timestamp: int,
              headers: list[tuple[str, bytes | None]]) -> None:
        self.writes.write(topic, partition, record_batch([(key, value, timestamp, headers)]))

    def close(self) -> None:
        self.writes.close()
