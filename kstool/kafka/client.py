"""Builds confluent-kafka clients from a ClientConfig and turns their errors into kstool errors."""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, TypeVar, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient, ClusterMetadata, OffsetSpec

from kstool.base.errors import BrokerUnreachableError, UsageError
from kstool.base.names import validate_topic
from kstool.config import ClientConfig
from kstool.kafka.ends import read_ends
from kstool.kafka.exceptions import AuthenticationError, AuthorizationError, KafkaOperationError, TopicNotFoundError
from kstool.kafka.read_errors import LEADER_MOVING

_log = logging.getLogger("kstool.kafka")

K = TypeVar("K")

_UNREACHABLE = {
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TIMED_OUT,
    KafkaError._RESOLVE,
}


# an ACL's refusal, by the kind of resource refused
_AUTHORIZATION_FAILURES = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "group",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional id",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
}


# how long a metadata request waits before it looks for a refused SASL/TLS handshake (doubled each time)
FIRST_METADATA_ASK_S = 0.5
# the peer ended a TLS handshake with an alert (OpenSSL: "ssl/tls alert certificate unknown: SSL
# alert number 46"): a broker that refused the client certificate says one of these (RFC 8446 6.2)
_TLS_ALERT = re.compile(r"alert ([a-z ]+): SSL alert number \d+")
_CERTIFICATE_ALERTS = {"bad certificate", "unsupported certificate", "certificate revoked", "certificate expired",
                       "certificate unknown", "unknown ca", "certificate required", "access denied"}

# the longest a ListOffsets ask waits before the metadata is read again for a new leader
LAST_OFFSETS_ASK_S = 2.0
# how the failure of offsets asked of a lost leader until the timeout begins (an outage to a run)
NO_LEADER_ANSWERED = "no leader answered"

# how long the first call's check that something listens at the bootstrap addresses may take
PROBE_TIMEOUT_S = 0.5

# Reading whole ranges: big fetches. One round trip per 1 MB (the default) caps a consumer at
# ~150k small records/s against a broker with per-fetch latency; 10 MB per partition does not.
BULK_READ_SETTINGS: dict[str, Any] = {"fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
                      "queued.min.messages": 1_000_000, "fetch.wait.max.ms": 50}


def produce(producer: Producer, topic: str, **kwargs: Any) -> None:
    """produce() with back-pressure: when the local queue is full, serve delivery reports and
    try again instead of failing."""
    while True:
        try:
            producer.produce(topic, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)


def require_partitions(topic: str, wanted: Iterable[int], available: list[int]) -> None:
    """A partition the topic does not have is a usage error, for every command alike."""
    missing = sorted(set(wanted) - set(available))
    if missing:
        raise UsageError(f"topic {topic!r} has no partition {missing[0]} "
                         f"(partitions: 0..{len(available) - 1})")


def error_code(exc: KafkaException) -> int | None:
    """The code of the KafkaError a client's KafkaException carries, if it carries one."""
    return exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None


def unanswered(error: BaseException | KafkaError | None) -> bool:
    """Whether a request's error (a KafkaException, or a KafkaError a result carries) is that
    no broker answered it: refused, or timed out. Asked of other nodes, it may be answered."""
    if isinstance(error, KafkaException):
        return error_code(error) in _UNREACHABLE
    return isinstance(error, KafkaError) and error.code() in _UNREACHABLE


def readonly_group_id() -> str:
    # librdkafka insists on a group.id even for assign()-only consumers; this one never commits.
    return f"kstool-readonly-{os.getpid()}"


@dataclass
class ClientErrors:
    """What the clients' error callback saw. An object of its own: a callback bound to
    KafkaClients would close a cycle (KafkaClients → admin client → callback → KafkaClients)
    that only the cyclic garbage collector frees, in whichever thread it runs, librdkafka's
    callback threads included; a client freed there can be destroyed from its own thread, which
    crashes the process (confluent-kafka-python#1761: a SIGSEGV in pthread_mutex_lock, seen in
    the engine's source runner)."""

    last: str | None = None
    # how often every broker went away (a producer made before the last time may be stale)
    broker_losses: int = 0
    # a SASL or TLS handshake failed: the client retries for ever, it will not pass by waiting
    refused_connection: KafkaError | None = None

    def record(self, err: KafkaError) -> None:
        _log.debug("client error: %s", err)
        self.last = err.str()
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.broker_losses += 1
        if err.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL) or _TLS_ALERT.search(err.str()):
            self.refused_connection = err


def every_bootstrap_refuses(config: ClientConfig) -> bool:
    """Nothing can answer at any bootstrap address: a refused TCP connect, or a host name that does
    not resolve, is known now instead of after a client's timeout. Any other outcome (an answer,
    a silent host) is left to the clients."""
    return _unreachable_bootstrap(config) is not None


def _unreachable_bootstrap(config: ClientConfig) -> str | None:
    """Why no bootstrap address can answer, known at once (None: one may)."""
    try:
        addresses = config.bootstrap_addresses()
    except ValueError:
        return None
    unknown = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
                return None
        except ConnectionRefusedError:
            continue
        except socket.gaierror:
            unknown.append(host)
        except OSError:
            return None
    if unknown:
        return f"no such host: {', '.join(unknown)} (the name does not resolve)"
    return "connection refused (no broker listens there; `kstool broker start` starts the embedded one)"


@dataclass
class KafkaClients:
    """The Kafka clients of one command; collaborators get this rather than raw configs."""

    config: ClientConfig
    _admin: AdminClient | None = None
    errors: ClientErrors = field(default_factory=ClientErrors)
    _probed: bool = False

    @property
    def broker_losses(self) -> int:
        return self.errors.broker_losses

    def _with_logging(self, conf: dict[str, Any]) -> dict[str, Any]:
        # librdkafka prints connection noise to stderr by default; route it to logging (shown
        # with --debug) and keep the last error to explain a failure (e.g. an SSL handshake).
        return {**conf, "logger": _log, "error_cb": self.errors.record}

    @property
    def timeout(self) -> float:
        return self.config.timeout_s

    def admin(self) -> AdminClient:
        if self._admin is None:
            if not self._probed:  # the command's first call: later ones (an outage's) wait as asked
                self._probed = True
                self.fail_if_every_bootstrap_refuses()
            self._admin = self._build(AdminClient, self.config.base())
        return self._admin

    def fail_if_every_bootstrap_refuses(self) -> None:
        why = _unreachable_bootstrap(self.config)
        if why is not None:
            raise BrokerUnreachableError(f"cannot reach Kafka at {self.config.bootstrap_servers}: {why}")

    def admin_at(self, address: str) -> AdminClient:
        """An admin client whose requests go to one broker: it connects to no other (librdkafka
        connects to learned brokers only when a request needs them)."""
        return cast(AdminClient, self._build(AdminClient, {**self.config.base(), "bootstrap.servers": address}))

    def drop_admin(self) -> None:
        """After an outage: an admin client that lived through it may keep a group coordinator
        that is gone (its group calls then time out); the next call makes a new one."""
        self._admin = None

    def producer(self, **extra: Any) -> Producer:
        # murmur2 is the Java client's partitioner: keys land where Kafka Streams apps expect them
        conf = {"partitioner": "murmur2_random", **self.config.producer_conf(**extra)}
        if str(conf.get("acks", "all")).lower() in ("all", "-1"):
            # as Java's producer is by default (KIP-679): a batch sent again after a leader was
            # lost is written once, not twice
            conf.setdefault("enable.idempotence", "true")
        return cast(Producer, self._build(Producer, conf))

    def consumer(self, group_id: str | None = None, **extra: Any) -> Consumer:
        conf = self.config.consumer_conf(
            **{
                "group.id": group_id or readonly_group_id(),
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": False,
                **extra,
            }
        )
        return cast(Consumer, self._build(Consumer, conf))

    def _build(self, kind: type, conf: dict[str, Any]) -> Any:
        try:
            return kind(self._with_logging(conf))
        except KafkaException as exc:
            err = exc.args[0]
            reason = err.str() if isinstance(err, KafkaError) else str(exc)
            raise KafkaOperationError(f"invalid client configuration: {reason}") from None

    def metadata(self, timeout_s: float | None = None) -> ClusterMetadata:
        # Always the full metadata: asking for one topic by name makes brokers with
        # auto.create.topics.enable create it, and a typo must not create topics.
        deadline = time.monotonic() + (self.timeout if timeout_s is None else timeout_s)
        ask = FIRST_METADATA_ASK_S
        while True:  # in asks of growing length (a slow broker still answers one): a refused handshake ends the wait
            try:
                return self.admin().list_topics(timeout=min(ask, max(deadline - time.monotonic(), 0.01)))
            except KafkaException as exc:
                err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if err is None or err.code() not in _UNREACHABLE or time.monotonic() >= deadline:
                    raise self.translate(exc) from None
                self.admin().poll(0)  # serves error_cb
                if self.errors.refused_connection is not None:
                    raise self._refused_handshake() from None
            ask *= 2

    def _refused_handshake(self) -> AuthenticationError:
        err, common, at = self.errors.refused_connection, self.config.common, self.config.bootstrap_servers
        assert err is not None
        alert = _TLS_ALERT.search(err.str())
        subject = self.config.client_certificate_subject()
        if alert and subject and alert.group(1) in _CERTIFICATE_ALERTS:
            return AuthenticationError(f"the broker at {at} refused the client certificate {subject} "
                                       f"(TLS alert: {alert.group(1)})")
        if err.code() == KafkaError._SSL or alert:
            return AuthenticationError(f"the TLS handshake with {at} failed: {err.str()}")
        user = common.get("sasl.username")
        mechanism = common.get("sasl.mechanism") or common.get("sasl.mechanisms") or "GSSAPI"
        if mechanism.upper() == "OAUTHBEARER" and common.get("sasl.oauthbearer.token.endpoint.url"):
            from kstool.kafka.oauth import expired_tokens

            expired = expired_tokens(common, self.config.timeout_s)  # the endpoint's refusal: raised
            return AuthenticationError(expired or f"the broker at {at} refused the token of client "
                                       f"{common.get('sasl.oauthbearer.client.id', '')} (OAUTHBEARER): {err.str()}")
        who = f" of {user} ({mechanism})" if user else ""
        return AuthenticationError(f"the broker at {at} refused the credentials{who}: {err.str()}")

    def topic_partitions(self, topic: str) -> list[int]:
        validate_topic(topic)
        tmeta = self.metadata().topics.get(topic)
        if tmeta is None or (tmeta.error is not None and
                             tmeta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise TopicNotFoundError(topic)
        if tmeta.error is not None:
            raise KafkaOperationError(f"topic {topic!r}: {tmeta.error.str()}")
        return sorted(tmeta.partitions)

    def leader(self, topic: str, partition: int) -> tuple[str, int]:
        """(host, port) of the partition's leader."""
        meta = self.metadata()
        try:
            broker = meta.brokers[meta.topics[topic].partitions[partition].leader]
        except KeyError:
            raise KafkaOperationError(f"no leader known for {topic}:{partition}") from None
        return cast(str, broker.host), broker.port

    def require_topics(self, topics: list[str]) -> dict[str, list[int]]:
        for topic in topics:
            validate_topic(topic)
        meta = self.metadata()
        missing = [t for t in topics if t not in meta.topics]
        if missing:
            raise TopicNotFoundError(missing[0])
        return {t: sorted(meta.topics[t].partitions) for t in topics}

    def require_allowed(self, topics: list[str], operation: str) -> None:
        """Refuse before acting when the broker says (KIP-430: the operations DescribeTopics
        names as the user's) that `operation` (an ACL's name: READ, DELETE) is not allowed on one
        of `topics`: a command that changes several must not change half of them. A broker that
        does not say lets the command go on."""
        if not topics:
            return
        futures = self.asked_of_a_live_controller(lambda timeout: self.admin().describe_topics(
            TopicCollection(topics), include_authorized_operations=True, request_timeout=timeout))
        for topic in topics:
            try:
                allowed = futures[topic].result().authorized_operations
            except KafkaException as exc:
                if unanswered(exc) and self.metadata().brokers:
                    # every ask went to a node just lost, named controller until it is fenced:
                    # the operation itself is refused if not allowed
                    _log.debug("not checked whether %s on %s is allowed: %s", operation, topic, exc)
                    return
                raise self.translate(exc, topic=(operation, topic)) from None
            self.require_operation(allowed, "topic", topic, operation)

    def asks(self, longest: float = float("inf")) -> Iterator[float]:
        """Request timeouts for asking again while a node is lost: of growing length (up to
        `longest`) until the client timeout, the metadata read afresh before each ask but the
        first. The caller stops when answered, or uses its last ask's answer once they end.
        librdkafka sends a request to the brokers its metadata names and does not look again,
        and a node killed a moment ago stays named until the controller fences it
        (broker.session.timeout.ms): asked once for the whole timeout, the request waits for it
        to the end; the metadata read again names others (a new leader, a live controller) or
        no longer names it."""
        deadline, length = time.monotonic() + self.timeout, FIRST_METADATA_ASK_S
        while True:
            yield min(length, max(deadline - time.monotonic(), 0.01))
            if time.monotonic() >= deadline:
                return
            self.metadata(timeout_s=max(deadline - time.monotonic(), 0.01))
            length = min(length * 2, longest)

    def asked_of_a_live_controller(self, ask: Callable[[float], dict[K, Future[Any]]]) -> dict[K, Future[Any]]:
        """A request librdkafka sends to the broker the metadata names as controller
        (DescribeConfigs, DescribeTopics, DeleteTopics), `ask`ed with each of asks()' timeouts
        until no answer is missing; returns the last ask's futures, all done. A KRaft broker
        names a random live broker as controller (KRaftMetadataCache.getRandomAliveBroker), a
        node just killed among them: `topics describe` then failed with "Failed while waiting
        for controller"."""
        futures: dict[K, Future[Any]] = {}
        for timeout in self.asks():
            futures = ask(timeout)
            wait(list(futures.values()))
            if not any(unanswered(f.exception()) for f in futures.values()):
                break
        return futures

    def require_operation(self, allowed: list[AclOperation] | None, kind: str, name: str, operation: str) -> None:
        """An AuthorizationError unless `allowed` (a description's authorized operations, None
        when the broker does not say) holds `operation`."""
        if allowed is not None and operation not in {op.name for op in allowed}:
            raise AuthorizationError(kind, name, operation, self.config.principal())

    def watermarks(self, tps: list[tuple[str, int]], answered_only: bool = False) -> dict[tuple[str, int], tuple[int, int]]:
        """(low, high) offsets per (topic, partition). The high watermark is the true end of
        each partition, confirmed by reading (see kstool.kafka.ends). `answered_only`: leave out
        the partitions whose leader cannot answer now (a node lost, its partitions not yet led
        elsewhere) instead of failing."""
        if not tps:
            return {}
        low = self._list_offsets(tps, OffsetSpec.earliest(), answered_only)  # type: ignore[no-untyped-call]
        latest = self._list_offsets(list(low), OffsetSpec.latest(), answered_only)  # type: ignore[no-untyped-call]
        high = read_ends(self, latest)
        return {tp: (low[tp], high[tp]) for tp in tps if tp in high}

    def log_starts(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The low watermark (first offset still in the log) per (topic, partition)."""
        return self._list_offsets(tps, OffsetSpec.earliest()) if tps else {}  # type: ignore[no-untyped-call]

    def _list_offsets(self, tps: list[tuple[str, int]], spec: OffsetSpec,
                      answered_only: bool = False) -> dict[tuple[str, int], int]:
        """Each partition's offset from its leader, asked again (asks()) while a leader is lost
        or moving. librdkafka's admin client asks the leader its metadata names: a node lost
        stays that leader until the ask times out (answered with offset -1001), and a new leader
        may not know its epoch yet (UNKNOWN_LEADER_EPOCH). With one ask of the whole timeout a
        run's batch waited 10 s for a lost leader and got -1001; asks of at most 2 s find the new
        leader within 2 s of its election. `answered_only`: what no leader answered by the
        timeout is left out instead of failing."""
        out: dict[tuple[str, int], int] = {}
        unanswered_tps: dict[tuple[str, int], KafkaException | None] = {}
        for timeout in self.asks(longest=LAST_OFFSETS_ASK_S):
            futures = self.admin().list_offsets({TopicPartition(t, p): spec for t, p in tps}, request_timeout=timeout)
            unanswered_tps = {}
            for tp, future in futures.items():
                try:
                    offset = future.result().offset
                except KafkaException as exc:
                    if error_code(exc) not in _UNREACHABLE | LEADER_MOVING:
                        raise self.translate(exc) from None
                    unanswered_tps[(tp.topic, tp.partition)] = exc
                    continue
                if offset >= 0:
                    out[(tp.topic, tp.partition)] = offset
                else:  # the ask timed out at a leader that is gone
                    unanswered_tps[(tp.topic, tp.partition)] = None
            if not unanswered_tps:
                return out
            _log.debug("asking again for the offsets of %s: their leader is lost or moving", sorted(unanswered_tps))
            tps = list(unanswered_tps)
        if answered_only:
            return out
        raise self._no_leader_answered(unanswered_tps)

    def _no_leader_answered(self, unanswered: dict[tuple[str, int], KafkaException | None]) -> Exception:
        errors = [exc for exc in unanswered.values() if exc is not None]
        if errors:
            return self.translate(errors[0])
        named = ", ".join(f"{t}:{p}" for t, p in sorted(unanswered)[:5]) + (" ..." if len(unanswered) > 5 else "")
        return BrokerUnreachableError(f"{NO_LEADER_ANSWERED} for the offsets of {named} within {self.timeout:g}s "
                                      "(a node lost: its partitions move once the controller fences it)")

    def refusal(self, exc: KafkaException, **refused: tuple[str, str | None]) -> AuthorizationError | None:
        """The AuthorizationError a KafkaException is, or None. `refused` names, per kind of
        resource (topic, group, transactional_id, cluster), the operation asked and the
        resource: what the error of that kind says (`topic=("READ", "orders")`)."""
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        kind = _AUTHORIZATION_FAILURES.get(err.code()) if err is not None else None
        if kind is None:
            return None
        operation, name = refused.get(kind.replace(" ", "_"), (None, None))
        return AuthorizationError(kind, name, operation, self.config.principal())

    def translate(self, exc: KafkaException, **refused: tuple[str, str | None]) -> Exception:
        """The kstool error for a client's KafkaException (`refused`: as for refusal())."""
        refusal = self.refusal(exc, **refused)
        if refusal is not None:
            return refusal
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if err is not None and err.code() in _UNREACHABLE:
            if self._admin is not None:
                self._admin.poll(0)  # serves error_cb: the reason behind the timeout
            detail = f"; {self.errors.last}" if self.errors.last else ""
            protocol = self.config.common.get("security.protocol", "").upper()
            over = f" over {protocol}" if protocol and protocol != "PLAINTEXT" else ""
            return BrokerUnreachableError(
                f"cannot reach Kafka at {self.config.bootstrap_servers}{over} within "
                f"{self.timeout:g}s ({err.str()}{detail})"
            )
        if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return KafkaOperationError("unknown topic or partition")
        return KafkaOperationError(str(err.str() if err is not None else exc))
