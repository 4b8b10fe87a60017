"""Apache Kafka for the tests: its jars from Maven Central (tests/reference/pom.xml, copied once
into the repo's ignored .cache/), and a single-node KRaft broker (broker and controller in one
JVM) on free ports. `python -m tests.apache_kafka` fetches the jars (what `make kafka` runs)."""

from __future__ import annotations

import base64
import ctypes
import fcntl
import hashlib
import os
import secrets
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient

from tests.cluster import free_ports

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


def kafka_tool(main: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """One of Apache Kafka's command-line tools, by its main class (what bin/kafka-*.sh run:
    org.apache.kafka.tools.TopicCommand for kafka-topics.sh, ...), as a second opinion."""
    return subprocess.run([_java(), "-Xmx256m", "-cp", f"{kafka_jars()}/*", main, *args],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


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


class KafkaBroker:
    """A KRaft broker of Apache Kafka in `workdir`: formatted and started by start(), stopped
    (SIGTERM, then SIGKILL) by stop(). It deletes no record by itself: no retention, and no log
    cleaner unless `log_cleaner`.

    Two listeners, as a secured cluster's operators have them: PLAINTEXT (`bootstrap`), whose
    clients are User:ANONYMOUS, a super user (the suite's tests need no ACL), and SASL_SSL
    (`secured_bootstrap`): SCRAM-SHA-512 users, a certificate made with the JDK's keytool
    (`ca_pem` verifies it), and the StandardAuthorizer, which allows a SCRAM user only what an
    ACL grants."""

    def __init__(self, workdir: Path, log_cleaner: bool = False):
        self.workdir, self.log_cleaner = workdir, log_cleaner
        self.port, self.controller_port, self.secured_port = free_ports(3)
        self.proc: subprocess.Popen | None = None
        self.keystore_password = secrets.token_urlsafe(12)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def secured_bootstrap(self) -> str:
        return f"127.0.0.1:{self.secured_port}"

    @property
    def ca_pem(self) -> Path:
        return self.workdir / "tls" / "ca.pem"

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

    @property
    def log(self) -> Path:
        return self.workdir / "broker.log"

    def _properties(self) -> Path:
        settings = {
            "process.roles": "broker,controller", "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port},"
                         f"SASL_SSL://127.0.0.1:{self.secured_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port},SASL_SSL://127.0.0.1:{self.secured_port}",
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
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
            # tests join groups often: no 3 s wait for more members (GroupCoordinatorConfig's defaults)
            "group.initial.rebalance.delay.ms": "0", "group.streams.initial.rebalance.delay.ms": "0",
            # streams groups' topologies kept by the broker (KIP-1331, 4.4+): off unless a plugin is set
            "group.streams.topology.description.plugin.class":
                "org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin",
            # the cleaner also applies retention to compact,delete topics (window stores'
            # changelogs): off unless a test asks for it, as retention below
            "log.cleaner.enable": str(self.log_cleaner).lower(), "log.cleaner.backoff.ms": "1000",
            # the tests' records carry times of 2026-01-01 and earlier: by the defaults (7 days) each
            # append would roll a segment and retention would delete the ones before it
            "log.retention.ms": "-1", "log.roll.ms": str(2**63 - 1),
            # and never checks retention: kstool sets a window store's changelog to the store's
            # retention + 1 day, as Kafka Streams does, and the check (every 5 minutes, first
            # after 30 s) and the cleaner deleted windows of 2026-01-01 from under the restore
            # tests (README)
            "log.retention.check.interval.ms": str(2**62), "log.initial.task.delay.ms": str(2**62),
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()), encoding="utf-8")
        return path

    @staticmethod
    def _command(main: str, *args: str) -> list[str]:
        return [_java(), "-Xmx512m", "-cp", f"{kafka_jars()}/*", main, *args]

    def start(self) -> "KafkaBroker":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._make_certificate()
        properties = self._properties()
        cluster_id = _cluster_id()
        formatted = subprocess.run(self._command("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c",
                                              str(properties)), capture_output=True, text=True, timeout=READY_TIMEOUT_S)
        if formatted.returncode != 0:
            raise ReferenceMissing(f"formatting Apache Kafka's log folder failed: {formatted.stderr.strip()[-300:]}")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self._command("kafka.Kafka", str(properties)), stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         preexec_fn=_die_with_parent)
        self._wait_until_serving()
        return self

    def _wait_until_serving(self) -> None:
        """The client listener opens once the broker is unfenced: the first Metadata answer means ready."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})  # refused until it listens
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise ReferenceMissing(f"Apache Kafka exited ({self.proc.returncode}) during start; see {self.log}")
            try:
                if admin.list_topics(timeout=1).brokers:
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise ReferenceMissing(f"Apache Kafka did not answer within {READY_TIMEOUT_S}s; see {self.log}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)  # a clean stop
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)


def main() -> None:
    try:
        print(kafka_jars())
    except ReferenceMissing as missing:
        raise SystemExit(f"error: {missing}") from None


if __name__ == "__main__":
    main()
