"""What kstool's own client asks about groups of any type: the API versions a broker serves, and
ListGroups v5 with its types filter (KIP-848), which lists the streams groups (KIP-1071) and share
groups (KIP-932) librdkafka's admin client does not list."""

from __future__ import annotations

import struct
from functools import partial

from kstool.config import ClientConfig
from kstool.kafka.exceptions import KafkaOperationError
from kstool.kafka.wire.codec import NO_TAGS, Reader, compact_array, compact_string
from kstool.kafka.wire.protocol import Connection, any_bootstrap, error_name

API_VERSIONS, LIST_GROUPS = 18, 16
GROUP_AUTHORIZATION_FAILED, GROUP_ID_NOT_FOUND = 30, 69


class GroupTypesUnsupported(KafkaOperationError):
    """The broker does not list groups by type (ListGroups v5: Apache Kafka 4.0+)."""


def api_versions(conn: Connection) -> dict[int, tuple[int, int]]:
    """The broker's (lowest, highest) version of each API it serves (ApiVersions v0)."""
    reply = conn.call(API_VERSIONS, 0, b"")
    error = reply.take(">h")
    if error:
        raise KafkaOperationError(f"the broker refused ApiVersions: {error_name(error)}")
    versions = {}
    for _ in range(reply.take(">i")):
        key, low, high = reply.take(">h"), reply.take(">h"), reply.take(">h")
        versions[key] = (low, high)
    return versions


def served_versions(config: ClientConfig) -> dict[int, tuple[int, int]]:
    """api_versions of a broker of the cluster (any that answers)."""
    try:
        conn = any_bootstrap(config)
    except OSError as exc:
        raise KafkaOperationError(f"cannot reach Kafka at {config.bootstrap_servers}: {exc}") from None
    try:
        return api_versions(conn)
    except (OSError, struct.error) as exc:
        raise KafkaOperationError(f"asking {config.bootstrap_servers} for its API versions failed: {exc}") from None
    finally:
        conn.close()


def list_groups_of_types(config: ClientConfig, brokers: list[tuple[str, int]],
                         types: list[str]) -> list[dict[str, str]]:
    """[{"group", "state", "type"}] of the groups of these types every broker lists (each
    coordinator lists its own), in one request per broker."""
    groups: dict[str, dict[str, str]] = {}
    for host, port in brokers:
        try:
            conn = Connection(host, port, config)
        except OSError as exc:
            raise KafkaOperationError(f"listing {' and '.join(types)} groups at {host}:{port} failed: {exc}") from None
        try:
            low, high = api_versions(conn).get(LIST_GROUPS, (0, -1))
            if high < 5:
                raise GroupTypesUnsupported("the broker does not serve ListGroups v5 (listing groups by type)")
            body = compact_array([]) + compact_array([compact_string(t) for t in types]) + NO_TAGS
            reply = conn.call(LIST_GROUPS, 5, body, flexible=True)
            reply.take(">i")  # throttle
            error = reply.take(">h")
            if error:
                raise KafkaOperationError(f"listing {' and '.join(types)} groups failed: {error_name(error)}")
            for listed in reply.compact_array(partial(_listed, reply)) or []:
                groups[listed["group"]] = listed
        except (OSError, struct.error) as exc:
            raise KafkaOperationError(f"listing {' and '.join(types)} groups at {host}:{port} failed: {exc}") from None
        finally:
            conn.close()
    return [groups[g] for g in sorted(groups)]


def _listed(reply: Reader) -> dict[str, str]:
    group = reply.compact_string() or ""
    reply.compact_string()  # protocol type
    state = reply.compact_string() or "UNKNOWN"
    kind = reply.compact_string() or ""
    reply.skip_tags()
    return {"group": group, "state": state.upper(), "type": kind}
