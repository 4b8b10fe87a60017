"""A secured cluster for the tests: the SASL_SSL listener of the Apache Kafka test broker
(tests/apache_kafka.KafkaBroker), two SCRAM users with passwords of their own, ACLs, and the
client.properties files Kafka's tools and kstool both take."""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path
from typing import cast

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.certificates import client_stores
from tests.conftest import Kafka, cli
from tests.helpers import wait_until


class Cluster:
    """The secured listener, its users (a password each) and the names the ACLs cover."""

    def __init__(self, kafka: Kafka, workdir: Path):
        assert kafka.secured_bootstrap is not None and kafka.ca_pem is not None
        self.kafka, self.workdir = kafka, workdir
        self.prefix = f"sec-{uuid.uuid4().hex[:6]}-"  # alice's topics, groups and transactional ids
        self.passwords = {user: secrets.token_urlsafe(16) for user in ("alice", "mallory")}
        self.key_passwords = {user: secrets.token_urlsafe(16) for user in self.passwords}  # their certificates' keys
        self.stores: dict[str, dict[str, Path]] = {}  # each user's client certificate in its stores

    def _admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.kafka.bootstrap})  # User:ANONYMOUS, a super user

    def add_users(self) -> None:
        upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                                password.encode()) for user, password in self.passwords.items()]
        admin = self._admin()
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result()

    def allow(self, user: str, kind: ResourceType, name: str, operation: AclOperation,
              pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> None:
        binding = AclBinding(kind, name, pattern, f"User:{user}", "*", operation, AclPermissionType.ALLOW)
        admin = self._admin()
        for future in admin.create_acls([binding]).values():
            future.result()

    def properties(self, user: str, password: str | None = None) -> Path:
        """A client.properties as Kafka's tools take it (the JAAS line, a PEM truststore)."""
        path = self.workdir / f"{user}.properties"
        path.write_text(
            f"bootstrap.servers={self.kafka.secured_bootstrap}\n"
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password or self.passwords[user]}";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={self.kafka.ca_pem}\n", encoding="utf-8")
        return path

    def certificate_properties(self, user: str, kind: str, key_password: str | None = None) -> Path:
        """A client.properties for the SSL listener as Kafka's tools take it: `user`'s client
        certificate (CN=user) and the broker's in JKS or PKCS12 (`kind`) stores, with their
        passwords (JKS: the key under a password of its own)."""
        assert self.kafka.mtls_bootstrap is not None and self.kafka.client_ca is not None
        if user not in self.stores:
            self.stores[user] = client_stores(self.kafka.client_ca, user, cast(Path, self.kafka.ca_pem),
                                              self.workdir / f"{user}-tls", self.passwords[user], self.key_passwords[user])
        stores = self.stores[user]
        suffix = "jks" if kind == "JKS" else "p12"
        path = self.workdir / f"{user}-{suffix}.properties"
        path.write_text(
            f"bootstrap.servers={self.kafka.mtls_bootstrap}\nsecurity.protocol=SSL\n"
            f"ssl.truststore.type={kind}\nssl.truststore.location={stores['truststore.' + suffix]}\n"
            f"ssl.truststore.password={self.passwords[user]}\n"
            f"ssl.keystore.type={kind}\nssl.keystore.location={stores['keystore.' + suffix]}\n"
            f"ssl.keystore.password={self.passwords[user]}\n"
            f"ssl.key.password={key_password or (self.key_passwords[user] if kind == 'JKS' else self.passwords[user])}\n",
            encoding="utf-8")
        return path

    def oauth_properties(self, user: str, secret: str | None = None) -> Path:
        """A client.properties for the OAUTHBEARER listener as Kafka's tools take it: the OIDC
        token endpoint and `user`'s client credentials (its password as the client secret)."""
        self.kafka.oidc.clients[user] = self.passwords[user]
        path = self.workdir / f"{user}-oauth.properties"
        path.write_text(
            f"bootstrap.servers={self.kafka.oauth_bootstrap}\nsecurity.protocol=SASL_PLAINTEXT\n"
            f"sasl.mechanism=OAUTHBEARER\nsasl.oauthbearer.token.endpoint.url={self.kafka.oidc.url}/token\n"
            "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
            "OAuthBearerLoginCallbackHandler\n"
            "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            f'clientId="{user}" clientSecret="{secret or self.passwords[user]}" scope="kafka";\n', encoding="utf-8")
        return path

    def as_user(self, user: str, *args: str, **kwargs):
        return cli("--command-config", self.properties(user), *args, **kwargs)

    def leaked(self, *texts: str) -> list[str]:
        secrets_of = [(user, secret) for user in self.passwords for secret in (self.passwords[user], self.key_passwords[user])]
        return [user for user, secret in secrets_of if any(secret in text for text in texts)]


def secure(kafka: Kafka, workdir: Path) -> Cluster:
    """alice, allowed everything on the names that start with the cluster's prefix, and mallory,
    allowed nothing yet; both able to log in when this returns."""
    cluster = Cluster(kafka, workdir)
    cluster.add_users()
    for kind in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID):
        cluster.allow("alice", kind, cluster.prefix, AclOperation.ALL, ResourcePatternType.PREFIXED)
    for user in cluster.passwords:  # the broker learns of new SCRAM users a moment after it answers
        wait_until(lambda user=user: cli("-b", str(kafka.secured_bootstrap), "--command-config", cluster.properties(user),
                                         "topics", "list").exit_code == 0, f"{user} to log in")
    return cluster
