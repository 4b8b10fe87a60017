"""Security and input safety: names, deletion guards, private files, masked secrets, client
security settings reaching the clients, and parsers that never crash."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kstool.changelog.layouts import KEY_FORMATS, KeySpec
from kstool.errors import UsageError
from kstool.kafka.consume import StartSpec
from kstool.kafka.exceptions import EnvelopeError
from kstool.kafka.records import from_envelope
from kstool.output import compile_record_format
from kstool.reset.exceptions import ResetPlanError
from kstool.reset.spec import parse_offsets_csv
from kstool.serdes import FORMATS, EncodeError, decoder, encoder
from tests.conftest import KSTOOL, cli
from tests.helpers import create_topic, produce_values

SECRET = "hunter2-do-not-print"


def _hash_tree(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def test_hostile_app_ids_are_usage_errors_and_touch_nothing(kafka, tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep").write_text("data")
    before = _hash_tree(tmp_path)
    for app_id in ("../x", "a/b", "..", "x y", "x" * 250):
        result = cli("reset", "--app-id", app_id, "--state-dir", str(tmp_path / "sub"))
        assert result.exit_code == 2, (app_id, result.stderr)
        assert "invalid application id" in result.stderr
    run = cli("run", "wordcount", "--input", "a", "--output", "b", "--app-id", "../x", "--once")
    assert run.exit_code == 2
    assert _hash_tree(tmp_path) == before


def test_reset_with_a_state_dir_without_the_app_refuses_and_deletes_nothing(kafka, topic_name, tmp_path):
    create_topic(kafka, topic_name, 1)
    produce_values(kafka, topic_name, [b"v"] * 3)
    state = tmp_path / "state"
    (state / "other-app" / "0_0").mkdir(parents=True)
    (state / "not-kafka-streams").mkdir()
    (state / "not-kafka-streams" / "important.txt").write_text("keep me")
    (state / "not-kafka-streams" / "0_0").mkdir()
    before = _hash_tree(state)
    for app_id in (topic_name, "not-kafka-streams"):
        result = cli("reset", "--app-id", app_id, "--input-topics", topic_name, "--state-dir", str(state))
        assert result.exit_code == 1, result.stderr
        assert "nothing was changed" in result.stderr
    for state_dir in ("/", str(Path.home())):
        result = cli("reset", "--app-id", "tmp", "--input-topics", topic_name, "--state-dir", state_dir)
        assert result.exit_code == 1 and "nothing was changed" in result.stderr
    assert _hash_tree(state) == before
    described = cli("groups", "describe", topic_name, "-o", "json")  # no offsets were committed
    assert described.exit_code == 1 or json.loads(described.stdout)["partitions"] == []


def test_config_show_masks_secrets_and_debug_output_never_shows_them(kafka, tmp_path):
    props = tmp_path / "client.properties"
    props.write_text(f"sasl.username=ops\nsasl.password={SECRET}\nssl.key.password={SECRET}\n"
                     f"sasl.oauthbearer.client.secret={SECRET}\nmy.custom.secret={SECRET}\n"
                     f"schema.registry.url=http://sr:8081\nbasic.auth.credentials.source=USER_INFO\n"
                     f"basic.auth.user.info=ops:{SECRET}\n")
    shown = cli("--command-config", str(props), "config", "show", "-o", "json")
    assert shown.exit_code == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["common"]["sasl.username"] == "ops"
    assert all(doc["common"][k] == "********" for k in
               ("sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret", "my.custom.secret"))
    # the registry's settings, as confluent-kafka's client names them, kept from librdkafka's
    assert doc["schema_registry"] == {"url": "http://sr:8081", "basic.auth.user.info": "********"}
    assert not [k for k in doc["common"] if "schema" in k or "basic.auth" in k]
    env = {**os.environ}
    for args in (["config", "show"], ["topics", "list"], ["consume", "no-such-topic", "-e"],
                 ["-X", "security.protocol=SSL", "--timeout", "2", "topics", "list"]):
        proc = subprocess.run([*KSTOOL, "--debug", "--command-config", str(props), *args],
                              capture_output=True, text=True, env=env, timeout=120)
        assert SECRET not in proc.stdout + proc.stderr, args


def test_client_security_settings_reach_the_clients(kafka):
    result = cli("-X", "security.protocol=SSL", "--timeout", "3", "topics", "list")
    assert result.exit_code == 1
    assert f"cannot reach Kafka at {kafka.bootstrap} over SSL" in result.stderr


def test_run_passes_client_settings_to_executors_without_exposing_them(kafka, spark, tmp_path):
    """The run's client settings reach Spark's Python workers through a private file (what
    the Kafka source's readers load); the secret never travels in the plan or in Spark's conf."""
    from kstool.config import build_client_config
    from kstool.engine.source import read_client_config, write_client_config

    config = build_client_config(overrides=[f"sasl.password={SECRET}", "client.id=from-the-driver"])
    path = write_client_config(config, tmp_path / "client.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    def on_executor(_):
        seen = read_client_config(str(path))
        yield seen.common["client.id"], seen.common["sasl.password"] == SECRET, seen == config

    assert spark.sparkContext.parallelize([0], 1).mapPartitions(on_executor).collect() == [
        ("from-the-driver", True, True)]
    assert SECRET not in str(spark.sparkContext.getConf().getAll())


def test_app_state_is_private(kafka, spark, topic_name):
    create_topic(kafka, topic_name, 1)
    produce_values(kafka, topic_name, [b"a b"])
    app = topic_name + "-app"
    assert cli("run", "wordcount", "--input", topic_name, "--output", topic_name + "-out",
               "--app-id", app, "--once").exit_code == 0
    root = Path(json.loads(cli("apps", "describe", app, "--offline", "-o", "json").stdout)["state_dir"])
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "app.json").stat().st_mode) == 0o600
    assert not (root / "client.json").exists()  # run-only
    for path in root.rglob("*"):
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}"


@given(st.text(max_size=20))
def test_start_spec_parser(text):
    try:
        spec = StartSpec.parse(text)
    except UsageError:
        return
    assert spec.kind in ("beginning", "end", "stored", "offset", "last")


@given(st.text(max_size=200))
@settings(max_examples=200)
def test_offsets_csv_parser(text):
    try:
        offsets = parse_offsets_csv(text)
    except ResetPlanError:
        return
    assert offsets and all(p >= 0 and o >= 0 for (_, p), o in offsets.items())


@given(st.integers(0, 10**6), st.integers(0, 10**12), st.text(alphabet="abc-._", min_size=1, max_size=10))
def test_offsets_csv_round_trip(partition, offset, topic):
    from kstool.reset.spec import format_offsets_csv

    data = {(topic, partition): offset}
    assert parse_offsets_csv(format_offsets_csv(data)) == data


@given(st.text(max_size=200))
@settings(max_examples=300)
def test_jsonl_envelope_parser(text):
    """Any text is a record or an EnvelopeError, and a record it reads writes back the same."""
    from kstool.kafka.records import to_envelope
    from kstool.serdes import decoder

    try:
        record = from_envelope(text)
    except EnvelopeError:
        return
    again = from_envelope(json.dumps(to_envelope(record, decoder("string"), decoder("string"))))
    assert (again.key, again.value, again.headers, again.timestamp, again.partition) == (
        record.key, record.value, record.headers, record.timestamp, record.partition)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)),
       st.sampled_from(FORMATS))
def test_what_an_encoder_writes_decodes_to_a_value_it_writes_again_byte_for_byte(value, fmt):
    try:
        encoded = encoder(fmt)(value)
    except EncodeError:
        return
    assert encoded is None or encoder(fmt)(decoder(fmt)(encoded)) == encoded


@given(st.text(max_size=30) | st.builds("{}:{}".format, st.sampled_from(["windowed", "window", "session",
                                                                      "time-windowed", "key-value", "x"]),
                                      st.sampled_from([*KEY_FORMATS, "nope"])))
def test_a_key_format_the_parser_accepts_reads_back_from_its_canonical_spelling(text):
    try:
        spec = KeySpec.parse(text)
    except UsageError:
        return
    canonical = spec.key_format if spec.layout == "key-value" else f"{spec.layout}:{spec.key_format}"
    assert spec.layout in ("key-value", "window", "session", "time-windowed") and KeySpec.parse(canonical) == spec


@given(st.text(max_size=40))
def test_record_format_strings(fmt):
    render = compile_record_format(fmt)
    out = render({"topic": "t", "partition": 0, "offset": 1, "timestamp": None, "key": None,
                  "value": {"base64": "AA=="}, "headers": []})
    assert isinstance(out, bytes)


def test_debug_run_on_spark_never_prints_the_password(kafka, topic_name, tmp_path):
    props = tmp_path / "client.properties"
    props.write_text(f"sasl.username=ops\nsasl.password={SECRET}\n")
    create_topic(kafka, topic_name, 1)
    produce_values(kafka, topic_name, [b"a b"])
    proc = subprocess.run([*KSTOOL, "--debug", "--command-config", str(props), "run", "wordcount",
                           "--input", topic_name, "--output", topic_name + "-out", "--app-id",
                           topic_name + "-app", "--once"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    output = proc.stdout + proc.stderr
    assert len(output.splitlines()) > 100  # it really was a debug run (Spark's own logs)
    assert SECRET not in output
    app_dir = Path(os.environ["KSTOOL_HOME"]) / "apps" / (topic_name + "-app")
    assert all(SECRET not in p.read_text(errors="replace") for p in app_dir.rglob("*")
               if p.is_file() and p.stat().st_size < 10_000_000)
