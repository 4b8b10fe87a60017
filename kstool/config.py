"""Effective Kafka client configuration: bootstrap, connection profile, --command-config, -X.

Precedence for the bootstrap address: -b, $KSTOOL_BOOTSTRAP_SERVERS, bootstrap.servers in
--command-config, the running embedded broker, localhost:9092 unless this home's embedded broker
is known and stopped (an error then). Client properties: the
embedded broker's profile (only when talking to that broker), then --command-config, then -X.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from kstool.base.errors import UsageError
from kstool.base.keystores import KeyStoreError, read_key_store
from kstool.broker.exceptions import BrokerStoppedError
from kstool.broker.profile import load_profile, load_running_profile

DEFAULT_BOOTSTRAP = "localhost:9092"
MASK = "********"
_SECRET_KEY = re.compile(r"password|secret|ssl\.key\.pem|sasl\.jaas\.config|private|user\.info|auth\.token", re.I)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')  # JAAS escapes \"
# a JAAS line's options that librdkafka has settings for: SCRAM/PLAIN's, OAuth client credentials'
_JAAS_SETTINGS = {"username": "sasl.username", "password": "sasl.password", "clientId": "sasl.oauthbearer.client.id",
                  "clientSecret": "sasl.oauthbearer.client.secret", "scope": "sasl.oauthbearer.scope"}
# Kafka 4.1+'s names of the OAuth client credentials (KIP-1139), and the Java client's login
# handler, which librdkafka's OIDC method stands for
_OAUTH_RENAMES = {"sasl.oauthbearer.client.credentials.client.id": "sasl.oauthbearer.client.id",
                  "sasl.oauthbearer.client.credentials.client.secret": "sasl.oauthbearer.client.secret"}
OAUTH_LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def mask_config(conf: dict[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret_key(k) else v) for k, v in conf.items()}


def parse_properties(text: str, origin: str) -> dict[str, str]:
    """Parse a Java .properties file as java.util.Properties.load does (the format Kafka's tools
    take): `key=value`, `key:value` or `key value`; `#`/`!` comments; a line ending in an odd
    number of backslashes continues on the next (its leading blanks dropped); escapes \\t \\n
    \\r \\f \\uXXXX, and a backslash before any other character keeps that character."""
    props: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        key, value = _split_key_value(line)
        props[_unescape(key, origin, lineno)] = _unescape(value, origin, lineno)
    return _translate_java_client_properties(props)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    pending: list[str] = []
    start = 0
    for lineno, raw in enumerate(re.split(r"\r\n|\r|\n", text), 1):
        line = raw.lstrip(_BLANKS)
        if not pending:
            if not line or line[0] in "#!":
                continue
            start = lineno
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:  # an odd number of backslashes: the last one joins the next line
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield start, "".join(pending)
        pending = []
    if pending:
        yield start, "".join(pending)


_BLANKS = " \t\f"


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line) and line[i] not in "=:" + _BLANKS:
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:].lstrip(_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANKS)
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str, origin: str, lineno: int) -> str:
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        code = text[i + 1]
        if code == "u":
            digits = text[i + 2:i + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise UsageError(f"{origin}:{lineno}: malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(code, code))
            i += 2
    return "".join(out)


def _translate_java_client_properties(props: dict[str, str]) -> dict[str, str]:
    """Map the Java client's settings that librdkafka names otherwise onto librdkafka's, so one
    client.properties serves Kafka's tools and kstool alike: the SASL JAAS line (SCRAM or PLAIN
    credentials, OAuth client credentials: librdkafka's OIDC method), and PEM trust and key
    stores (`ssl.truststore.type=PEM`, KIP-651). JKS and PKCS12 stores kstool reads
    itself (ClientConfig.key_stores)."""
    jaas = props.pop("sasl.jaas.config", None)
    if jaas:
        options = {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(jaas)}
        for option, setting in _JAAS_SETTINGS.items():
            if option in options:
                props.setdefault(setting, options[option])
    for java_name, name in _OAUTH_RENAMES.items():
        _rename(props, java_name, name)
    if "sasl.oauthbearer.token.endpoint.url" in props:  # OAuth client credentials at an OIDC token endpoint
        props.setdefault("sasl.oauthbearer.method", "oidc")
        if props.get("sasl.login.callback.handler.class") == OAUTH_LOGIN_HANDLER:
            del props["sasl.login.callback.handler.class"]
    if props.get("ssl.truststore.type", "").upper() == "PEM":
        del props["ssl.truststore.type"]
        _rename(props, "ssl.truststore.location", "ssl.ca.location")
        _rename(props, "ssl.truststore.certificates", "ssl.ca.pem")
    keystore_type = props.get("ssl.keystore.type", "").upper()
    if keystore_type == "PEM":
        del props["ssl.keystore.type"]
        if "ssl.keystore.location" in props:  # one file holds the key and its certificate chain
            props.setdefault("ssl.key.location", props["ssl.keystore.location"])
            _rename(props, "ssl.keystore.location", "ssl.certificate.location")
        _rename(props, "ssl.keystore.key", "ssl.key.pem")
        _rename(props, "ssl.keystore.certificate.chain", "ssl.certificate.pem")
    if props.get("ssl.endpoint.identification.algorithm") == "":  # Java's way of saying none
        props["ssl.endpoint.identification.algorithm"] = "none"
    return props


def _rename(props: dict[str, str], java_name: str, librdkafka_name: str) -> None:
    if java_name in props:
        props.setdefault(librdkafka_name, props.pop(java_name))


def parse_key_values(pairs: tuple[str, ...] | list[str], flag: str = "-X") -> dict[str, str]:
    props: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} expects key=value, got {pair!r}")
        props[key.strip()] = value
    return props


@dataclass(frozen=True)
class ClientConfig:
    """Everything needed to build any Kafka client; plain data, so it pickles to Spark executors."""

    bootstrap_servers: str
    bootstrap_source: str
    common: dict[str, str] = field(default_factory=dict)
    producer: dict[str, str] = field(default_factory=dict)
    consumer: dict[str, str] = field(default_factory=dict)
    profile_name: str | None = None
    single_record_tail: bool = False
    timeout_s: float = 10.0
    debug: bool = False
    schema_registry: dict[str, str] = field(default_factory=dict)  # SchemaRegistryClient settings
    # --command-config properties of Java's client alone (librdkafka refuses them): left out, named in a warning
    ignored_properties: list[str] = field(default_factory=list)
    # JKS or PKCS12 trust and key stores (ssl.truststore.*, ssl.keystore.*, ssl.key.password):
    # read where a client is made, their certificates and key given to it as PEM in memory
    key_stores: dict[str, str] = field(default_factory=dict)

    def bootstrap_addresses(self) -> list[tuple[str, int]]:
        """(host, port) of each bootstrap server (`host:port`, `[v6]:port`, `PROTOCOL://host:port`);
        ValueError for a port that is not a number."""
        addresses = []
        for server in self.bootstrap_servers.split(","):
            host, _, port = server.strip().split("://", 1)[-1].rpartition(":")
            addresses.append((host.strip("[]"), int(port)))
        return addresses

    def base(self) -> dict[str, str]:
        return {**self.common, **tls_material(tuple(sorted(self.key_stores.items()))),
                "bootstrap.servers": self.bootstrap_servers}

    def principal(self) -> str | None:
        """Who the broker sees, as far as the client knows: the SASL user, or the subject of the
        client certificate (the broker's ssl.principal.mapping.rules may name it otherwise)."""
        if self.common.get("sasl.username"):
            return f"User:{self.common['sasl.username']}"
        subject = self.client_certificate_subject()
        return f"the client certificate's {subject}" if subject else None

    def client_certificate_subject(self) -> str | None:
        """The subject of the certificate the client presents from a keystore or PEM text."""
        chain = self.base().get("ssl.certificate.pem")
        if not chain:
            return None
        from cryptography import x509

        return x509.load_pem_x509_certificate(chain.encode()).subject.rfc4514_string()

    def producer_conf(self, **extra: str) -> dict[str, str]:
        return {**self.base(), **self.producer, **extra}

    def consumer_conf(self, **extra: str) -> dict[str, str]:
        return {**self.base(), **self.consumer, **extra}

    def describe(self) -> dict:
        """The effective configuration for display, secrets masked."""
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "bootstrap_source": self.bootstrap_source,
            "profile": self.profile_name,
            "single_record_tail": self.single_record_tail,
            "timeout_s": self.timeout_s,
            "common": mask_config(self.common),
            "producer": mask_config(self.producer),
            "consumer": mask_config(self.consumer),
            "schema_registry": mask_config(self.schema_registry),
            "key_stores": mask_config(self.key_stores),
        }


def build_client_config(
    bootstrap: str | None = None,
    command_config: str | None = None,
    overrides: tuple[str, ...] | list[str] = (),
    timeout_s: float = 10.0,
    debug: bool = False,
) -> ClientConfig:
    file_props: dict[str, str] = {}
    if command_config:
        path = Path(command_config).expanduser()
        try:  # java.util.Properties.load(InputStream), as Kafka's tools read it: ISO-8859-1, \uXXXX for the rest
            file_props = parse_properties(path.read_text(encoding="latin-1"), str(path))
        except OSError as exc:
            raise UsageError(f"cannot read --command-config {path}: {exc.strerror}") from None
    registry = _schema_registry_settings(file_props)
    x_props = parse_key_values(overrides)
    stores = _key_store_settings(file_props) | _key_store_settings(x_props)
    tls_material(tuple(sorted(stores.items())))  # a store that does not open: said now, in one line
    ignored = _java_only_properties(file_props)
    for key in ignored:
        del file_props[key]
    registry.update(_schema_registry_settings(x_props))
    user_props = {**file_props, **x_props}
    profile = load_running_profile()

    if bootstrap:
        servers, source = bootstrap, "--bootstrap-servers"
    elif os.environ.get("KSTOOL_BOOTSTRAP_SERVERS"):
        servers, source = os.environ["KSTOOL_BOOTSTRAP_SERVERS"], "KSTOOL_BOOTSTRAP_SERVERS"
    elif "bootstrap.servers" in user_props:
        servers, source = user_props["bootstrap.servers"], "client properties"
    elif profile is not None:
        servers, source = profile.bootstrap_servers, "embedded broker"
    else:
        _refuse_if_embedded_broker_stopped()
        servers, source = DEFAULT_BOOTSTRAP, "default"
    user_props.pop("bootstrap.servers", None)
    _check_bootstrap(servers, source)

    common, producer, consumer, profile_name, tail = {}, {}, {}, None, False
    if profile is not None and profile.bootstrap_servers == servers:
        common, producer, consumer = dict(profile.common), dict(profile.producer), dict(profile.consumer)
        profile_name, tail = profile.name, profile.single_record_tail
    common.update(user_props)
    return ClientConfig(
        bootstrap_servers=servers,
        bootstrap_source=source,
        common=common,
        producer=producer,
        consumer=consumer,
        profile_name=profile_name,
        single_record_tail=tail,
        timeout_s=timeout_s,
        debug=debug,
        schema_registry=registry,
        ignored_properties=ignored,
        key_stores=stores,
    )


# a JKS or PKCS12 store's settings, as Kafka's Java client names them (librdkafka: a PKCS12
# keystore by the same names)
_TRUST_STORE = ("ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type")
_KEY_STORE = ("ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type", "ssl.key.password")


def _key_store_settings(props: dict[str, str]) -> dict[str, str]:
    """Take a JKS or PKCS12 trust or key store's settings out of the properties (a PEM store's
    were renamed for librdkafka already: _translate_java_client_properties)."""
    taken: dict[str, str] = {}
    for names in (_TRUST_STORE, _KEY_STORE):
        if names[0] in props:
            taken |= {name: props.pop(name) for name in names if name in props}
    return taken


@functools.lru_cache(maxsize=8)
def tls_material(stores: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """The stores' certificates and key as librdkafka's (and Python's ssl) PEM settings: the
    truststore's certificates (ssl.ca.pem), the keystore's key and its chain. Read once a process."""
    settings, material = dict(stores), {}
    for names, what in ((_TRUST_STORE, "truststore"), (_KEY_STORE, "keystore")):
        location = settings.get(names[0])
        if location is None:
            continue
        kind = settings.get(names[2], "JKS").upper()
        if kind not in ("JKS", "PKCS12"):
            raise UsageError(f"ssl.{what}.type={kind} is not a store kstool reads (JKS, PKCS12 or PEM)")
        try:
            store = read_key_store(location, settings.get(names[1]), settings.get("ssl.key.password"),
                                   f"ssl.{what}.location")
        except KeyStoreError as exc:
            raise UsageError(str(exc)) from None
        if what == "truststore":
            material["ssl.ca.pem"] = store.certificates_pem()
        elif store.key is None:
            raise UsageError(f"ssl.keystore.location {location} holds no private key (a keystore's client "
                             "certificate comes with its key)")
        else:
            material["ssl.certificate.pem"], material["ssl.key.pem"] = store.chain_pem(), store.key_pem()
    return material


def _check_bootstrap(servers: str, source: str) -> None:
    """Each server a host and a port of 1-65535, before any client tries it: a usage error, not
    a connection refused after a wait."""
    for server in servers.split(","):
        host, _, port = server.strip().split("://", 1)[-1].rpartition(":")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise UsageError(f"invalid bootstrap server {server.strip()!r} (from {source}): expected HOST:PORT "
                             "with a port from 1 to 65535")


def _java_only_properties(props: dict[str, str]) -> list[str]:
    """The properties librdkafka does not take by themselves: unknown to it (`default.api.timeout.ms`)
    or Java's alone (`ssl.truststore.location`: JKS). A file shared with Kafka's tools holds them;
    kstool goes on without them. Each is tried alone on a client that is made and dropped (~1 ms)."""
    from confluent_kafka import KafkaException, Producer

    ignored = []
    for key, value in props.items():
        if key == "bootstrap.servers":  # known, and a client given it would connect
            continue
        try:
            Producer({key: value, "log_level": "0"})
        except KafkaException as exc:
            reason = exc.args[0].str()
            if reason.startswith(("No such configuration property", "Java ")):
                ignored.append(key)
        except (TypeError, ValueError):
            pass  # the client made with the whole file says what is wrong
    return ignored


def _refuse_if_embedded_broker_stopped() -> None:
    """The default address may be another home's broker: a command meant for this home's
    stopped one (a reset, say) must not reach it silently."""
    stopped = load_profile()
    if stopped is not None:
        raise BrokerStoppedError(
            f"this kstool home's embedded broker ({stopped.bootstrap_servers}) is not running: start it with "
            "`kstool broker start`, or name a broker with -b HOST:PORT (or KSTOOL_BOOTSTRAP_SERVERS)")


def _schema_registry_settings(props: dict[str, str]) -> dict[str, str]:
    """Take the Schema Registry keys out of the client properties (librdkafka rejects them), as
    confluent-kafka's SchemaRegistryClient names them: schema.registry.url -> url, other
    schema.registry.* without the prefix, basic.auth.* and bearer.auth.* as they are. Java's
    basic.auth.credentials.source goes: a user.info given is what it names."""
    settings: dict[str, str] = {}
    for key in [k for k in props if k.startswith(("schema.registry.", "basic.auth.", "bearer.auth."))]:
        value = props.pop(key)
        if key != "basic.auth.credentials.source":
            settings[key.removeprefix("schema.registry.")] = value
    return settings
