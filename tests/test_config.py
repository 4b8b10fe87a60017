"""Client configuration (kstool.config): properties files parsed completely, security settings
reaching the clients and the executors, and secrets never printed."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from kstool.config import build_client_config, parse_properties
from tests.conftest import cli
from tests.helpers import KSTOOL, create_topic, produce_values

SECRET = "hunter2-do-not-print"


def test_command_config_parses_java_properties_completely():
    # java.util.Properties#load: separators '=', ':' or blanks; '\' continues a line
    text = ("# comment\n! also a comment\n"
            "security.protocol = SASL_SSL\n"
            "sasl.mechanism:PLAIN\n"
            "client.id kstool\\ ops\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
            "    username=\"alice\" \\\n"
            "    password=\"p=w:d\";\n"
            "ssl.ca.location=C:\\\\certs\\\\ca.pem\n"
            "x.unicode=caf\\u00e9\n"
            "key\\=with\\:separators = v=1\n"
            "empty.value\n")
    props = parse_properties(text, "client.properties")
    assert props == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "client.id": "kstool ops",
                     "sasl.username": "alice", "sasl.password": "p=w:d",
                     "ssl.ca.location": "C:\\certs\\ca.pem", "x.unicode": "café",
                     "key=with:separators": "v=1", "empty.value": ""}


def test_command_config_is_read_as_java_reads_it_iso_8859_1(tmp_path):
    """java.util.Properties.load(InputStream), which Kafka's tools use: a Latin-1 byte is that
    character (it crashed kstool with UnicodeDecodeError), and \\uXXXX stands for the rest."""
    props = tmp_path / "client.properties"
    props.write_bytes(b"sasl.username=ren\xe9\nsasl.password=p\\u00e9ss\\u20ac\n")
    config = build_client_config("127.0.0.1:9", str(props))
    assert (config.common["sasl.username"], config.common["sasl.password"]) == ("ren\u00e9", "p\u00e9ss\u20ac")
    shown = cli("config", "show", "-b", "127.0.0.1:9", "--command-config", str(props), "-o", "json")
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["common"]["sasl.username"] == "ren\u00e9"


def test_java_only_client_properties_are_left_out_with_a_warning_and_the_command_goes_on(kafka, tmp_path):
    """A file shared with Kafka's tools holds properties of Java's client alone: librdkafka
    refused them and the command failed."""
    props = tmp_path / "client.properties"
    props.write_text("default.api.timeout.ms=60000\nsasl.login.refresh.buffer.seconds=300\nclient.id=ops\n")
    listed = cli("topics", "list", "--command-config", str(props), "-o", "json")
    assert listed.exit_code == 0, listed.stderr
    assert listed.stderr == (f"kstool: warning: {props}: left out default.api.timeout.ms, "
                             "sasl.login.refresh.buffer.seconds (Java client properties librdkafka does not take)\n")
    assert isinstance(json.loads(listed.stdout), list)
    config = build_client_config(None, str(props))
    assert config.common == {"client.id": "ops"}
    # typed on the command line, a property is the user's own: refused as librdkafka refuses it
    typed = cli("topics", "list", "-X", "default.api.timeout.ms=1")
    assert typed.exit_code == 1 and "default.api.timeout.ms" in typed.stderr


def test_pem_stores_of_the_java_client_become_librdkafkas_settings():
    """KIP-651's PEM trust and key stores, by file or inline, as Kafka's tools take them."""
    by_file = parse_properties("ssl.truststore.type=PEM\nssl.truststore.location=/etc/kafka/ca.pem\n"
                               "ssl.keystore.type=PEM\nssl.keystore.location=/etc/kafka/client.pem\n"
                               f"ssl.key.password={SECRET}\nssl.endpoint.identification.algorithm=\n", "f")
    assert by_file == {"ssl.ca.location": "/etc/kafka/ca.pem", "ssl.certificate.location": "/etc/kafka/client.pem",
                       "ssl.key.location": "/etc/kafka/client.pem", "ssl.key.password": SECRET,
                       "ssl.endpoint.identification.algorithm": "none"}
    inline = parse_properties("ssl.truststore.type=pem\nssl.truststore.certificates=CA\nssl.keystore.type=PEM\n"
                              "ssl.keystore.key=KEY\nssl.keystore.certificate.chain=CHAIN\n", "f")
    assert inline == {"ssl.ca.pem": "CA", "ssl.key.pem": "KEY", "ssl.certificate.pem": "CHAIN"}
    # JKS and PKCS12 stores stay as they are named: kstool reads them (ClientConfig.key_stores)
    stores = parse_properties("ssl.keystore.type=PKCS12\nssl.keystore.location=k.p12\n"
                              "ssl.truststore.type=JKS\nssl.truststore.location=t.jks\n", "f")
    assert stores == {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "k.p12", "ssl.truststore.type": "JKS",
                      "ssl.truststore.location": "t.jks"}


def test_config_show_reads_a_multiline_jaas_file_and_masks_the_password(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("sasl.jaas.config=x.PlainLoginModule required \\\n  username=\"bob\" \\\n"
                     "  password=\"hunter2\";\nsecurity.protocol SASL_PLAINTEXT\n")
    result = cli("config", "show", "--command-config", str(props), "-o", "json")
    assert result.exit_code == 0, result.stderr
    common = json.loads(result.stdout)["common"]
    assert common["sasl.username"] == "bob" and common["security.protocol"] == "SASL_PLAINTEXT"
    assert "hunter2" not in result.stdout


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
               ("sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret"))
    # not a client property of librdkafka's: left out, named (never its value)
    assert "my.custom.secret" not in doc["common"] and "left out my.custom.secret" in shown.stderr
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
    from kstool.engine.io.source_options import read_client_config, write_client_config

    config = build_client_config(overrides=[f"sasl.password={SECRET}", "client.id=from-the-driver"])
    path = write_client_config(config, tmp_path / "client.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    def on_executor(_):
        seen = read_client_config(str(path))
        yield seen.common["client.id"], seen.common["sasl.password"] == SECRET, seen == config

    assert spark.sparkContext.parallelize([0], 1).mapPartitions(on_executor).collect() == [
        ("from-the-driver", True, True)]
    assert SECRET not in str(spark.sparkContext.getConf().getAll())


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
