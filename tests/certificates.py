"""Certificates for the tests' TLS client authentication: a CA the test broker's SSL listener
trusts for client certificates, client certificates it signs (or another CA signs), and the
stores an operator keeps them in: PKCS12 made here, JKS by the JDK's keytool (what Kafka's
tools read natively and kstool reads itself)."""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID


def _name(common_name: str) -> x509.Name:
    """CN=<common_name>,O=kstool tests (its RDNs in the order that writes it so, most specific first)."""
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kstool tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_ca(directory: Path, common_name: str = "kstool test clients CA") -> Path:
    """A CA: its certificate (`<directory>/ca.pem`, returned) and key (`ca.key`, unencrypted)."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(_name(common_name))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (directory / "ca.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    (directory / "ca.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return directory / "ca.pem"


def client_stores(ca_pem: Path, common_name: str, trusted_pem: Path, directory: Path, password: str,
                  key_password: str) -> dict[str, Path]:
    """A client certificate for `common_name` signed by the CA at `ca_pem` (its key beside it),
    kept as an operator keeps it: a keystore and a truststore (trusting `trusted_pem`) in PKCS12
    and in JKS (the JKS key under its own `key_password`). Returns {"keystore.p12", ...}."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert = x509.load_pem_x509_certificate(ca_pem.read_bytes())
    ca_key = serialization.load_pem_private_key((ca_pem.parent / "ca.key").read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]  # an EC key
    paths = {name: directory / name for name in ("keystore.p12", "truststore.p12", "keystore.jks", "truststore.jks")}
    paths["keystore.p12"].write_bytes(pkcs12.serialize_key_and_certificates(
        common_name.encode(), key, cert, [ca_cert], serialization.BestAvailableEncryption(password.encode())))
    from tests.apache_kafka import _java  # (which makes the broker's CA with make_ca)

    keytool = str(Path(_java()).with_name("keytool"))
    for args in (["-importcert", "-noprompt", "-alias", "broker", "-file", str(trusted_pem), "-keystore",
                  str(paths["truststore.p12"]), "-storetype", "PKCS12", "-storepass", password],
                 ["-importcert", "-noprompt", "-alias", "broker", "-file", str(trusted_pem), "-keystore",
                  str(paths["truststore.jks"]), "-storetype", "JKS", "-storepass", password],
                 ["-importkeystore", "-srckeystore", str(paths["keystore.p12"]), "-srcstoretype", "PKCS12",
                  "-srcstorepass", password, "-destkeystore", str(paths["keystore.jks"]), "-deststoretype", "JKS",
                  "-deststorepass", password, "-destkeypass", key_password, "-srcalias", common_name,
                  "-destalias", common_name]):
        made = subprocess.run([keytool, *args], capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stdout + made.stderr
    return paths
