"""Shared fixtures: one Kafka-protocol broker per test session (the embedded one on a free
port, or the broker named by KSTOOL_TEST_BOOTSTRAP), and helpers to run the real CLI."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import settings

from kstool.commands.main import run as kstool_run
from tests.helpers import KSTOOL

pytest_plugins = ["tests.crashes", "tests.cpu_use"]  # a dead xdist worker's stacks on the terminal; CPU per test

# no time limit per example: hypothesis's default (200 ms) is a wall-clock assert, which a busy
# 2-core CI machine failed (tests/reset/test_offset_spec.py, beside the Spark tests)
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

# runs and state reads stay in the test process, on the shared Spark session (and the kill tests'
# subprocesses on Spark of their own): a command would otherwise start a warm engine. The engine's
# own tests turn it back on (tests/engine/daemon/test_engine.py).
os.environ["KSTOOL_ENGINE"] = "off"
# A suite started in the background by a script (CI) inherits SIGINT ignored, and so would every
# kstool it starts: a Ctrl-C sent before kstool's own handler is in place would be lost silently.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# The suite's JVMs live seconds: C2's compiler threads raise a cold run's CPU time from 11.5 to
# 16.7 s (measured), paid by every kill and restart on 2 cores; compiled code is not under test.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str
    stdout_bytes: bytes


@dataclass
class Kafka:
    bootstrap: str
    embedded: bool
    # an Apache Kafka test broker's SASL_SSL listener (tests/apache_kafka.KafkaBroker) and the
    # certificate that verifies it
    secured_bootstrap: str | None = None
    ca_pem: Path | None = None
    # its SSL listener, which takes client certificates signed by `client_ca`
    mtls_bootstrap: str | None = None
    client_ca: Path | None = None
    # its SASL_PLAINTEXT listener, which takes OAUTHBEARER tokens of `oidc` (tests.oidc.OidcProvider)
    oauth_bootstrap: str | None = None
    oidc: Any = None
    keeps_topologies: bool = False  # a topology description plugin (KIP-1331): the test broker's

    def producer_conf(self) -> dict:
        conf = {"bootstrap.servers": self.bootstrap}
        if self.embedded:  # the embedded broker's watermark needs single-record batches
            conf["batch.num.messages"] = 1
        return conf

    def consumer_conf(self) -> dict:
        return {"bootstrap.servers": self.bootstrap, "group.id": f"test-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False}


def cli(*args: str, input: str | bytes | None = None, env: dict | None = None) -> Result:
    """Run kstool in this process, exactly as the console script does (error handling included)."""
    runner = CliRunner()
    with runner.isolation(input=input, env=env) as (out, err, _):
        code = kstool_run([str(a) for a in args])
        sys.stdout.flush()
        sys.stderr.flush()
        raw = out.getvalue()
        return Result(code, raw.decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace"), raw)


def cli_subprocess(*args: str, input: bytes | None = None, timeout: float = 120,
                   env: dict | None = None) -> Result:
    proc = subprocess.run([*KSTOOL, *map(str, args)], input=input, capture_output=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"),
                  proc.stderr.decode("utf-8", "replace"), proc.stdout)


INTEGRATION_FIXTURES = {"kafka", "suite_kafka", "embedded_kafka", "spark", "fresh_home", "spark_cluster", "own_broker",
                        "jvm_archive", "apache_kafka", "on_apache_kafka", "secured_cluster", "topologies_kafka",
                        "kafka_cluster", "cluster"}


def pytest_collection_modifyitems(items) -> None:
    """Tests that need the broker, Spark or a broker of their own are the integration tier;
    `make test-fast` runs the rest (no JVM, no broker). `make test`'s workers (xdist) take a
    module at a time in this order: the longest first (tests/start_order.txt), then the other
    integration modules, then the rest, so that the workers end together."""
    for item in items:
        if INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
    from tests.cpu_use import start_order_ranks  # a plugin (pytest_plugins): imported after pytest registers it

    ranks = start_order_ranks()
    integration = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("integration")}

    def start_order(item) -> tuple[int, bool]:
        module = item.nodeid.split("::")[0]
        return ranks.get(module, len(ranks)), module not in integration
    items.sort(key=start_order)


# the suite's broker: "apache-kafka" (a KRaft broker of its own per worker, from Maven Central:
# tests/apache_kafka.py) or "embedded" (kstool's own); KSTOOL_TEST_BOOTSTRAP names any other.
# Tests marked embedded_tier run on the embedded broker too (pytest_generate_tests).
TEST_BROKER = os.environ.get("KSTOOL_TEST_BROKER", "apache-kafka")


@pytest.fixture(scope="session")
def suite_kafka(tmp_path_factory) -> Kafka:
    home = tmp_path_factory.mktemp("kstool-home")
    os.environ["KSTOOL_HOME"] = str(home)
    # one cache for the run's workers: a JVM class-data archive is valid for one SPARK_HOME path,
    # and a cache per worker had three (each recorded, ~25 CPU-s, and its JVMs slow until then)
    run_dir = tmp_path_factory.getbasetemp()
    os.environ["KSTOOL_CACHE"] = str((run_dir.parent if "PYTEST_XDIST_WORKER" in os.environ else run_dir) / "kstool-cache")
    external = os.environ.get("KSTOOL_TEST_BOOTSTRAP")
    if external:
        os.environ["KSTOOL_BOOTSTRAP_SERVERS"] = external
        yield Kafka(external, embedded=False)
        return
    if TEST_BROKER == "apache-kafka":
        from tests.apache_kafka import KafkaBroker

        broker = KafkaBroker(tmp_path_factory.mktemp("apache-kafka")).start()
        os.environ["KSTOOL_BOOTSTRAP_SERVERS"] = broker.bootstrap
        try:
            yield _apache_kafka(broker)
        finally:
            broker.stop()
        return
    os.environ.pop("KSTOOL_BOOTSTRAP_SERVERS", None)
    yield from _embedded_broker()


def _apache_kafka(broker) -> Kafka:
    return Kafka(broker.bootstrap, embedded=False, secured_bootstrap=broker.secured_bootstrap, ca_pem=broker.ca_pem,
                 mtls_bootstrap=broker.mtls_bootstrap, client_ca=broker.client_ca, oauth_bootstrap=broker.oauth_bootstrap,
                 oidc=broker.oidc, keeps_topologies=True)


def _embedded_broker():
    """`kstool broker start` in the session's kstool home: its connection profile there makes
    kstool apply the embedded broker's workarounds to this address alone."""
    started = cli_subprocess("broker", "start", "--port", "0", timeout=60)
    assert started.exit_code == 0, started.stderr
    try:
        yield Kafka(started.stdout.strip(), embedded=True)
    finally:
        cli_subprocess("broker", "stop")


@pytest.fixture(scope="session")
def embedded_kafka(suite_kafka) -> Kafka:
    """The embedded broker: the suite's own, or one of this worker's beside Apache Kafka."""
    if suite_kafka.embedded:
        yield suite_kafka
        return
    yield from _embedded_broker()


@pytest.fixture
def kafka(request, suite_kafka, monkeypatch) -> Kafka:
    """The broker of the test: the suite's, or for an embedded_tier test's [embedded] run the
    embedded broker, which its commands then reach (given no -b)."""
    if getattr(request, "param", None) != "embedded" or suite_kafka.embedded:
        return suite_kafka
    embedded = request.getfixturevalue("embedded_kafka")
    monkeypatch.setenv("KSTOOL_BOOTSTRAP_SERVERS", embedded.bootstrap)
    return embedded


def pytest_generate_tests(metafunc) -> None:
    """An embedded_tier test runs on both brokers when the suite's is not the embedded one."""
    if (metafunc.definition.get_closest_marker("embedded_tier") and "kafka" in metafunc.fixturenames
            and TEST_BROKER != "embedded" and not os.environ.get("KSTOOL_TEST_BOOTSTRAP")):
        metafunc.parametrize("kafka", ["apache-kafka", "embedded"], indirect=True)


@pytest.fixture(scope="session")
def apache_kafka(suite_kafka, tmp_path_factory) -> Kafka:
    """An Apache Kafka broker for what the embedded one lacks (DeleteRecords, CreatePartitions,
    a log cleaner, Kafka's tools): the suite's own when it is Apache Kafka, else one of this worker's."""
    if not suite_kafka.embedded:
        yield suite_kafka
        return
    yield from _broker_of_this_worker(tmp_path_factory.mktemp("apache-kafka"))


def _broker_of_this_worker(workdir: Path):
    """A test broker (tests/apache_kafka.py) started in `workdir`, stopped when its fixture ends."""
    from tests.apache_kafka import KafkaBroker

    broker = KafkaBroker(workdir).start()
    try:
        yield _apache_kafka(broker)
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def secured_cluster(apache_kafka, tmp_path_factory):
    """The Apache Kafka broker's SASL_SSL listener with its users and ACLs (tests/secured.py);
    a broker of this worker's own when the suite's is another (KSTOOL_TEST_BOOTSTRAP)."""
    from tests.secured import secure

    workdir = tmp_path_factory.mktemp("secured")
    if apache_kafka.secured_bootstrap is not None:
        yield secure(apache_kafka, workdir)
        return
    for broker in _broker_of_this_worker(workdir / "broker"):
        yield secure(broker, workdir)


@pytest.fixture(scope="session")
def twin(tmp_path_factory):
    """Kafka Streams' TopologyTestDriver in one JVM of this worker's (tests/twin.py): the oracle."""
    from tests.twin import Twin

    oracle = Twin(tmp_path_factory.mktemp("twin"))
    try:
        yield oracle
    finally:
        oracle.close()


@pytest.fixture(scope="session")
def topologies_kafka(apache_kafka, tmp_path_factory) -> Kafka:
    """An Apache Kafka broker that keeps streams groups' topologies (KIP-1331); a broker of this
    worker's own when the suite's is another (KSTOOL_TEST_BOOTSTRAP)."""
    if apache_kafka.keeps_topologies:
        yield apache_kafka
        return
    yield from _broker_of_this_worker(tmp_path_factory.mktemp("topologies-kafka"))


@pytest.fixture(scope="module")
def kafka_cluster(suite_kafka, tmp_path_factory):
    """Three Apache Kafka nodes replicated as production clusters are (tests/apache_kafka.KafkaCluster),
    for the tests of replication and of nodes lost (whatever broker the suite runs on: the tests
    stop and kill its nodes). A module's own: three idle nodes take ~5 CPU-s a minute, which
    the rest of a worker's session would pay (the two modules that use them run a few minutes)."""
    from tests.apache_kafka import KafkaCluster

    started = KafkaCluster(tmp_path_factory.mktemp("kafka-cluster")).start()
    started.kafka = Kafka(started.bootstrap, embedded=False)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def cluster(kafka_cluster, monkeypatch):
    """The three-node cluster, every node up, the test's commands' broker (given no -b); a node
    the test stopped or killed is started again after it."""
    kafka_cluster.start_stopped()
    monkeypatch.setenv("KSTOOL_BOOTSTRAP_SERVERS", kafka_cluster.bootstrap)
    yield kafka_cluster
    kafka_cluster.start_stopped()


@pytest.fixture
def on_apache_kafka(apache_kafka, monkeypatch) -> Kafka:
    """The test's commands (given no -b) talk to the Apache Kafka broker."""
    monkeypatch.setenv("KSTOOL_BOOTSTRAP_SERVERS", apache_kafka.bootstrap)
    return apache_kafka


@pytest.fixture
def topic_name(request) -> str:
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40]
    return f"{base}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def fresh_home(tmp_path: Path, monkeypatch) -> Path:
    """A kstool home of its own (its cache too), for tests that manage an embedded broker themselves."""
    home = tmp_path / "home"
    monkeypatch.setenv("KSTOOL_HOME", str(home))
    monkeypatch.delenv("KSTOOL_CACHE", raising=False)
    monkeypatch.delenv("KSTOOL_BOOTSTRAP_SERVERS", raising=False)
    return home


@pytest.fixture(scope="session")
def jvm_archive(suite_kafka) -> None:
    """Spark's class-data archive (kstool.engine.spark.jvmcache), recorded once by a run that exits
    normally, before any other JVM of the session starts: a run that is killed leaves no
    recorder of it, so without this every start of the kill tests would load Spark's classes the slow way.
    The xdist workers of one run share the cache (suite_kafka): the first records the archive
    while the others wait (a recording is a cold run and the archive's dump, paid once). Under
    `make test` the installation's archive (`kstool engine prepare`) is there already: nothing to record."""
    from kstool.base.home import cache_dir, private_dir
    from kstool.engine.spark.java import require_java
    from kstool.engine.spark.jvmcache import JvmCache
    from kstool.engine.spark.spark_home import spark_home_for

    cache = private_dir(cache_dir())
    with open(cache / ".tests-recording.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        jvm = JvmCache(require_java(), spark_home_for("local"))
        jvm.java_option()  # adopts a finished recording
        if not jvm.has_archive:
            _record_jvm_archive(cache)
            jvm.java_option()  # adopts the recording


def _record_jvm_archive(cache: Path) -> None:
    from kstool.base.processes import pid_alive

    topic = f"jvm-archive-{uuid.uuid4().hex[:6]}"
    assert cli("topics", "create", topic, "--partitions", "1").exit_code == 0
    assert cli("produce", topic, input="a b\n").exit_code == 0
    run = cli_subprocess("run", "wordcount", "--input", topic, "--output", topic + "-out", "--app-id", topic,
                         "--once", timeout=300)
    assert run.exit_code == 0, run.stderr
    deadline = time.monotonic() + 120  # the recorder the run left writes it after kstool exits
    while time.monotonic() < deadline and any(
            pid_alive(int(m.read_text() or 0)) for m in cache.glob("*.jvm-pid")):
        time.sleep(0.2)


def home_sharing_jvm_archive(tmp_path: Path) -> dict[str, str]:
    """The environment of a kstool home of a test's own that shares the session's cache (its JVM
    class-data archive and SPARK_HOME): its JVMs start as fast as the session's. A copy of the
    cache would not do: the archive is valid for one SPARK_HOME path. Call it before KSTOOL_HOME
    points elsewhere."""
    from kstool.base.home import cache_dir

    return {"KSTOOL_HOME": str(tmp_path / "home"), "KSTOOL_CACHE": str(cache_dir())}


@pytest.fixture(scope="session")
def spark(suite_kafka, jvm_archive, tmp_path_factory):
    """One Spark session for the whole test run; app runs in this process reuse it."""
    from kstool.engine.spark.session import SparkOptions, build_session

    log = tmp_path_factory.mktemp("spark") / "spark.log"
    session, _ = build_session(SparkOptions(master="local[2]"), app_name="kstool-tests", log_file=log)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def spark_cluster(suite_kafka, tmp_path_factory):
    """A Spark standalone cluster: a master and two workers of one core each, neither of
    which sees the kstool home (nor its cache) nor the other's files. A module's own: one module
    uses it, and its JVMs would idle through the rest of its worker's session."""
    from kstool.base.home import cache_dir, private_dir
    from tests.cluster import SparkCluster, unshare_problem

    problem = unshare_problem()
    if problem:
        pytest.skip(f"a worker that behaves as another host needs its own mount namespace: {problem}")
    hidden = [Path(os.environ["KSTOOL_HOME"]), private_dir(cache_dir())]  # mount points: they must exist
    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster"), hidden)
    yield cluster
    cluster.stop()
