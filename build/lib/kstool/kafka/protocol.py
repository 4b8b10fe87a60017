"""A minimal Kafka wire-protocol client for the one admin call librdkafka lacks: removing
members from a consumer group (LeaveGroup v3, KIP-345), as Kafka's reset tool does with
--force. PLAINTEXT and SSL listeners; SASL is not spoken here."""

from __future__ import annotations

import socket
import ssl
import struct

from kstool.config import ClientConfig
from kstool.kafka.exceptions import KafkaOperationError

FIND_COORDINATOR, LEAVE_GROUP = 10, 13
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


class _Connection:
    def __init__(self, host: str, port: int, config: ClientConfig):
        protocol = config.common.get("security.protocol", "plaintext").lower()
        if protocol.startswith("sasl"):
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
