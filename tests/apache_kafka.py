"""Apache Kafka for the tests: its jars from Maven Central (tests/reference/pom.xml, copied once
into the repo's ignored .cache/), and a single-node KRaft broker (broker and controller in one
JVM) on free ports. `python -m tests.apache_kafka` fetches the jars and records their class-data
archive (what `make kafka` runs)."""

from __future__ import annotations

import base64
import ctypes
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable

from confluent_kafka.admin import AdminClient

from tests.certificates import make_ca
from tests.cluster import free_ports
from tests.oidc import AUDIENCE, OidcProvider

REPO = Path(__file__).resolve().parent.parent
KAFKA_VERSION = "4.4.0"  # tests/reference/pom.xml's kafka.version
POM = REPO / "tests" / "reference" / "pom.xml"
# the jars of this pom: another pom (a dependency added) fetches into a folder of its own
CACHE = REPO / ".cache" / f"apache-kafka-{KAFKA_VERSION}-{hashlib.sha256(POM.read_bytes()).hexdigest()[:8]}"
READY_TIMEOUT_S = 120  # a hang guard: a busy 2-core machine formats and starts in ~10-20 s
# the full name pins the plugin's version: one goal, no other plugin to resolve
COPY_DEPENDENCIES = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"


class ReferenceMissing(RuntimeError):
    """Java or Maven is missing, or Maven could not fetch the jars: one line says which."""


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        raise ReferenceMissing("Apache Kafka for the tests needs Java 17+: apt-get install openjdk-17-jdk-headless "
                               "(or set JAVA_HOME)")
    return java


def kafka_jars() -> Path:
    """The folder of Apache Kafka's jars, fetched with Maven the first time (a lock: the xdist
    workers of one run fetch it once)."""
    lib = CACHE / "lib"
    if (CACHE / ".complete").exists():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ReferenceMissing("Apache Kafka for the tests comes from Maven Central through Maven: "
                               "apt-get install maven")
    _java()
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (CACHE / ".complete").exists():
            partial = CACHE / "lib.partial"
            shutil.rmtree(partial, ignore_errors=True)
            fetched = subprocess.run([mvn, "-q", "-B", "-f", str(POM), COPY_DEPENDENCIES,
                                      f"-DoutputDirectory={partial}", "-DincludeScope=runtime"],
                                     capture_output=True, text=True)
            if fetched.returncode != 0:
                last = (fetched.stdout + fetched.stderr).strip().splitlines()[-1:] or ["no output"]
                raise ReferenceMissing(f"Maven could not fetch Apache Kafka {KAFKA_VERSION}: {last[0]}")
            shutil.rmtree(lib, ignore_errors=True)
            partial.rename(lib)
            (CACHE / ".complete").touch()
    return lib


def kafka_tool(main: str, *args: str, timeout: float = 120, system: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess:
    """One of Apache Kafka's command-line tools, by its main class (what bin/kafka-*.sh run:
    org.apache.kafka.tools.TopicCommand for kafka-topics.sh, ...), as a second opinion;
    `system`: Java system properties (KAFKA_OPTS' -D...)."""
    properties = [f"-D{name}={value}" for name, value in (system or {}).items()]
    return subprocess.run([_java(), "-Xmx256m", *class_sharing(), *properties, "-cp", f"{kafka_jars()}/*", main, *args],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def class_archive() -> Path:
    """The class-data archive of this Java for Apache Kafka's JVMs (a JVM ignores one of another
    Java or class path, and starts as it would without)."""
    java = hashlib.sha256(os.path.realpath(_java()).encode()).hexdigest()[:8]
    return CACHE / f"classes-java-{java}.jsa"


def class_sharing() -> list[str]:
    """The option that maps the archive, once `make kafka` recorded it; a JVM whose class path
    starts with Kafka's jars can use it."""
    archive = class_archive()
    return [f"-XX:SharedArchiveFile={archive}"] if archive.exists() else []


def record_class_archive() -> Path:
    """Once per jars and Java (`make kafka`, before any test): a broker started and stopped
    cleanly writes the classes it loaded into a class-data archive (JDK 13+'s dynamic CDS),
    which every later Kafka JVM of the tests maps instead of loading them from the jars. With
    the suite's C1 (tests/conftest.py) a broker's start took 2.4 CPU-s instead of 4.1 (3.2 s
    instead of 5.2), its format 1.7 instead of 2.4, a tool's 0.4 instead of 0.65 (measured on a
    2-core machine; the suite starts ~100 such JVMs on each run)."""
    archive = class_archive()
    if not archive.exists():
        partial = archive.with_suffix(".partial")
        with tempfile.TemporaryDirectory() as workdir:
            broker = KafkaBroker(Path(workdir), java_options=(f"-XX:ArchiveClassesAtExit={partial}",))
            broker.start()
            broker.stop()
        # a broker killed in its stop wrote a partial archive, if any
        if broker.proc is not None and broker.proc.returncode in (0, -signal.SIGTERM, 128 + signal.SIGTERM) \
                and partial.exists():
            partial.rename(archive)
        partial.unlink(missing_ok=True)
    return archive


def _die_with_parent() -> None:
    """In the broker's process before it runs Java: SIGTERM when the test process that started it
    ends, however it ends (a crashed xdist worker left its broker running)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _cluster_id() -> str:
    """As Kafka's Uuid.randomUuid: 16 random bytes, URL-safe base64 unpadded, not starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


# what every test broker and cluster node runs with, besides its listeners and replication
# Kafka 4's OAuth code fetches only the URLs this system property lists (KIP-1139's allow list)
ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
TEST_SETTINGS = {
    # tests join groups often: no 3 s wait for more members (GroupCoordinatorConfig's defaults)
    "group.initial.rebalance.delay.ms": "0", "group.streams.initial.rebalance.delay.ms": "0",
    # streams groups' topologies kept by the broker (KIP-1331, 4.4+): off unless a plugin is set
    "group.streams.topology.description.plugin.class":
        "org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin",
    "log.cleaner.enable": "false", "log.cleaner.backoff.ms": "1000",  # see KafkaBroker.log_cleaner
    # the tests' records carry times of 2026-01-01 and earlier: by the defaults (7 days) each
    # append would roll a segment and retention would delete the ones before it
    "log.retention.ms": "-1", "log.roll.ms": str(2**63 - 1),
    # and never checks retention: kstool sets a window store's changelog to the store's
    # retention + 1 day, as Kafka Streams does, and the check (every 5 minutes, first
    # after 30 s) and the cleaner deleted windows of 2026-01-01 from under the restore
    # tests (docs/architecture.md)
    "log.retention.check.interval.ms": str(2**62), "log.initial.task.delay.ms": str(2**62),
}


class KafkaBroker:
    """A KRaft broker of Apache Kafka in `workdir`: formatted and started by start(), stopped
    (SIGTERM, then SIGKILL) by stop(). It deletes no record by itself: no retention, and no log
    cleaner unless `log_cleaner`.

    Three listeners, as a secured cluster's operators have them: PLAINTEXT (`bootstrap`), whose
    clients are User:ANONYMOUS, a super user (the suite's tests need no ACL); SASL_SSL
    (`secured_bootstrap`): SCRAM-SHA-512 users, a certificate made with the JDK's keytool
    (`ca_pem` verifies it); and SSL with client authentication (`mtls_bootstrap`): certificates
    signed by `client_ca`, the principal their CN. The StandardAuthorizer allows a SCRAM user or
    a certificate only what an ACL grants. `java_options`: more options for its JVM (the archive's
    recording)."""

    def __init__(self, workdir: Path, log_cleaner: bool = False, java_options: tuple[str, ...] = ()):
        self.workdir, self.log_cleaner, self.java_options = workdir, log_cleaner, java_options
        self.port, self.controller_port, self.secured_port, self.mtls_port, self.oauth_port = free_ports(5)
        self.oidc: OidcProvider | None = None  # the OAUTHBEARER listener's token issuer, while it runs
        self.proc: subprocess.Popen | None = None
        self.keystore_password = secrets.token_urlsafe(12)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def secured_bootstrap(self) -> str:
        return f"127.0.0.1:{self.secured_port}"

    @property
    def mtls_bootstrap(self) -> str:
        return f"127.0.0.1:{self.mtls_port}"

    @property
    def oauth_bootstrap(self) -> str:
        return f"127.0.0.1:{self.oauth_port}"

    @property
    def ca_pem(self) -> Path:
        return self.workdir / "tls" / "ca.pem"

    @property
    def client_ca(self) -> Path:
        """The CA whose client certificates the SSL listener takes (its key beside it)."""
        return self.workdir / "tls" / "clients" / "ca.pem"

    @property
    def _keystore(self) -> Path:
        return self.workdir / "tls" / "broker.p12"

    def _make_certificate(self) -> None:
        """A self-signed certificate for 127.0.0.1 and localhost (~0.5 s): the broker's PKCS12
        keystore, and its certificate in PEM for the clients to trust."""
        self.ca_pem.parent.mkdir(parents=True, exist_ok=True)
        keytool = str(Path(_java()).with_name("keytool"))
        store = ["-keystore", str(self._keystore), "-storepass", self.keystore_password]
        for args in (["-genkeypair", "-alias", "broker", "-keyalg", "EC", "-groupname", "secp256r1",
                      "-validity", "3650", "-dname", "CN=localhost", "-ext", "SAN=dns:localhost,ip:127.0.0.1",
                      "-storetype", "PKCS12", "-keypass", self.keystore_password],
                     ["-exportcert", "-rfc", "-alias", "broker", "-file", str(self.ca_pem)]):
            made = subprocess.run([keytool, *args, *store], capture_output=True, text=True, timeout=READY_TIMEOUT_S)
            if made.returncode != 0:
                raise ReferenceMissing(f"keytool could not make the broker's certificate: {made.stdout.strip()[-300:]}")
        make_ca(self.client_ca.parent)

    @property
    def log(self) -> Path:
        return self.workdir / "broker.log"

    def _properties(self, oidc_url: str) -> Path:
        settings = {
            "process.roles": "broker,controller", "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port},"
                         f"SASL_SSL://127.0.0.1:{self.secured_port},SSL://127.0.0.1:{self.mtls_port},"
                         f"SASL_PLAINTEXT://127.0.0.1:{self.oauth_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port},SASL_SSL://127.0.0.1:{self.secured_port},"
                                    f"SSL://127.0.0.1:{self.mtls_port},SASL_PLAINTEXT://127.0.0.1:{self.oauth_port}",
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,"
                                              "SASL_PLAINTEXT:SASL_PLAINTEXT",
            # SASL_PLAINTEXT: OAUTHBEARER tokens of the tests' OIDC provider, checked by Kafka's own validator
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            "sasl.oauthbearer.jwks.endpoint.url": f"{oidc_url}/jwks",
            "sasl.oauthbearer.expected.audience": AUDIENCE, "sasl.oauthbearer.expected.issuer": oidc_url,
            # SSL: client certificates of the tests' CA, their principal the certificate's CN
            "listener.name.ssl.ssl.client.auth": "required", "listener.name.ssl.ssl.truststore.type": "PEM",
            "listener.name.ssl.ssl.truststore.location": str(self.client_ca),
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(self._keystore),
            "ssl.keystore.password": self.keystore_password, "ssl.key.password": self.keystore_password,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",  # the PLAINTEXT and CONTROLLER listeners' clients
            "log.dirs": str(self.workdir / "data"),
            # one broker: every internal topic with one replica, and one partition (faster to create)
            "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1", "share.coordinator.state.topic.min.isr": "1",
            **TEST_SETTINGS,
            # the cleaner also applies retention to compact,delete topics (window stores'
            # changelogs): off unless a test asks for it, as retention (TEST_SETTINGS)
            "log.cleaner.enable": str(self.log_cleaner).lower(),
            # one node: no voter or broker waits on the controller's no-op metadata records (one
            # every 500 ms by default); one a minute halves an idle broker's CPU (1.58 -> 0.78
            # CPU-s a minute, measured)
            "metadata.max.idle.interval.ms": "60000",
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()), encoding="utf-8")
        return path

    def start(self) -> "KafkaBroker":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._make_certificate()
        self.oidc = OidcProvider().start()
        properties = self._properties(self.oidc.url)
        _format(properties, _cluster_id())
        self.proc = _spawn(properties, self.log, {ALLOWED_URLS: f"{self.oidc.url}/jwks"}, self.java_options)
        _wait_until_serving(self.bootstrap, lambda brokers: brokers >= 1, [self.proc], self.log, self.stop)
        return self

    def stop(self) -> None:
        _stop(self.proc)
        if self.oidc is not None:
            self.oidc.stop()


def _command(main: str, *args: str, system: dict[str, str] | None = None, java_options: tuple[str, ...] = ()
             ) -> list[str]:
    properties = [f"-D{name}={value}" for name, value in (system or {}).items()]
    return [_java(), "-Xmx512m", *java_options, *class_sharing(), *properties, "-cp", f"{kafka_jars()}/*", main,
            *args]


def _format(properties: Path, cluster_id: str) -> None:
    formatted = subprocess.run(_command("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(properties)),
                               capture_output=True, text=True, timeout=READY_TIMEOUT_S)
    if formatted.returncode != 0:
        raise ReferenceMissing(f"formatting Apache Kafka's log folder failed: {formatted.stderr.strip()[-300:]}")


def _spawn(properties: Path, log_path: Path, system: dict[str, str] | None = None,
           java_options: tuple[str, ...] = ()) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        return subprocess.Popen(_command("kafka.Kafka", str(properties), system=system, java_options=java_options),
                                stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)


def _wait_until_serving(bootstrap: str, ready: Callable[[int], bool], procs: list[subprocess.Popen], log: Path,
                        give_up: Callable[[], None]) -> None:
    """A client listener opens once its broker is unfenced: a Metadata answer whose broker count
    is `ready` means ready."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})  # refused until it listens
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        for proc in procs:
            if proc.poll() is not None:
                give_up()
                raise ReferenceMissing(f"Apache Kafka exited ({proc.returncode}) during start; see {log}")
        try:
            if ready(len(admin.list_topics(timeout=1).brokers)):
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            give_up()
            raise ReferenceMissing(f"Apache Kafka did not answer within {READY_TIMEOUT_S}s; see {log}")
        time.sleep(0.2)


def _stop(proc: subprocess.Popen | None, clean: bool = True) -> None:
    """SIGTERM (a clean stop, then SIGKILL if it hangs), or SIGKILL at once: a node lost."""
    if proc is None or proc.poll() is not None:
        return
    if clean:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
            return
        except subprocess.TimeoutExpired:
            pass
    proc.kill()
    proc.wait(30)


class KafkaCluster:
    """Three Apache Kafka nodes on this machine, each broker and controller (KRaft combined mode,
    static voters), replicated as production clusters are: every topic and internal topic with 3
    replicas, `min.insync.replicas=2`, no unclean leader election. A node can be stopped cleanly,
    killed (SIGKILL) and started again on its ports with its data."""

    NODES = (1, 2, 3)

    def __init__(self, workdir: Path):
        self.workdir = workdir
        ports = free_ports(2 * len(self.NODES))
        self.ports = dict(zip(self.NODES, ports[::2]))
        self.controller_ports = dict(zip(self.NODES, ports[1::2]))
        self.procs: dict[int, subprocess.Popen | None] = dict.fromkeys(self.NODES)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.address(node) for node in self.NODES)

    def address(self, node: int) -> str:
        return f"127.0.0.1:{self.ports[node]}"

    def _properties(self, node: int) -> Path:
        voters = ",".join(f"{n}@127.0.0.1:{self.controller_ports[n]}" for n in self.NODES)
        settings = {
            "process.roles": "broker,controller", "node.id": str(node), "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{self.address(node)},CONTROLLER://127.0.0.1:{self.controller_ports[node]}",
            "advertised.listeners": f"PLAINTEXT://{self.address(node)}",
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.workdir / f"node{node}"),
            "default.replication.factor": "3", "min.insync.replicas": "2", "unclean.leader.election.enable": "false",
            "offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2", "share.coordinator.state.topic.replication.factor": "3",
            "share.coordinator.state.topic.min.isr": "2",
            # one partition each: every group's coordinator is __consumer_offsets-0's leader, every
            # transactional id's __transaction_state-0's (the fault tests find them by that)
            "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            # a lost node is fenced, and its leaderships move, after 3 s instead of 9 s
            # (BrokerHeartbeatManager): the fault tests wait for that many times
            "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "1000",
            **TEST_SETTINGS,
        }
        path = self.workdir / f"server{node}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()), encoding="utf-8")
        return path

    def log(self, node: int) -> Path:
        return self.workdir / f"node{node}.log"

    def start(self) -> "KafkaCluster":
        self.workdir.mkdir(parents=True, exist_ok=True)
        cluster_id = _cluster_id()
        for node in self.NODES:
            _format(self._properties(node), cluster_id)
        for node in self.NODES:
            self.procs[node] = _spawn(self.workdir / f"server{node}.properties", self.log(node))
        running = [p for p in self.procs.values() if p is not None]
        _wait_until_serving(self.bootstrap, lambda listed: listed == len(self.NODES), running, self.workdir, self.stop)
        return self

    def stop_node(self, node: int) -> None:
        """A clean shutdown: the node hands its leaderships over before it exits."""
        _stop(self.procs[node])

    def kill_node(self, node: int) -> None:
        """A hard shutdown, as a host lost: SIGKILL."""
        _stop(self.procs[node], clean=False)

    def start_node(self, node: int) -> None:
        """Start a stopped node again on its ports and data, and wait until it serves."""
        assert self.procs[node] is None or self.procs[node].poll() is not None, f"node {node} is running"
        proc = self.procs[node] = _spawn(self.workdir / f"server{node}.properties", self.log(node))
        # its own listener: a killed node stays in the others' metadata until its session times out
        _wait_until_serving(self.address(node), lambda listed: listed >= 1, [proc], self.log(node), lambda: None)

    def running(self) -> list[int]:
        return [n for n, p in self.procs.items() if p is not None and p.poll() is None]

    def start_stopped(self) -> None:
        for node in self.NODES:
            if node not in self.running():
                self.start_node(node)

    def leader(self, topic: str, partition: int) -> int:
        """The node the live nodes' metadata names as the partition's leader (-1: none, or no such
        partition yet)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        found = admin.list_topics(timeout=10).topics.get(topic)  # a topic just created may not be there yet
        return found.partitions[partition].leader if found is not None and partition in found.partitions else -1

    def out_of_sync(self, topic: str, node: int) -> bool:
        """The controller took `node` out of every ISR of the topic (after its session timed out)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        return all(node not in p.isrs for p in admin.list_topics(timeout=10).topics[topic].partitions.values())

    def group_coordinator(self) -> int:
        """Every group's coordinator: the leader of __consumer_offsets' only partition."""
        return self.leader("__consumer_offsets", 0)

    def transaction_coordinator(self) -> int:
        """Every transactional id's coordinator: the leader of __transaction_state's only partition
        (the topic exists once a first transactional producer started)."""
        return self.leader("__transaction_state", 0)

    def active_controller(self) -> int:
        """The KRaft quorum's leader, as kafka-metadata-quorum.sh describe --status says."""
        status = kafka_tool("org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", self.bootstrap,
                            "describe", "--status")
        found = re.search(r"LeaderId:\s+(\d+)", status.stdout)
        assert found, status.stdout + status.stderr[-1000:]
        return int(found.group(1))

    def stop(self) -> None:
        for proc in self.procs.values():
            _stop(proc, clean=False)  # the whole cluster goes: no leadership to hand over


def main() -> None:
    try:
        print(kafka_jars())
        record_class_archive()
    except ReferenceMissing as missing:
        raise SystemExit(f"error: {missing}") from None


if __name__ == "__main__":
    main()
