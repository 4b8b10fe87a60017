"""Java key stores (kstool.base.keystores) against the JDK's keytool: the certificates it lists
from a JKS or PKCS12 store are those kstool reads, the key kstool recovers belongs to the
store's certificate, and a wrong password is refused by the store's own checks."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_private_key

from kstool.base.keystores import KeyStoreError, read_key_store
from tests.apache_kafka import _java
from tests.certificates import client_stores, make_ca


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    workdir = tmp_path_factory.mktemp("stores")
    server = make_ca(workdir / "server", "localhost")  # stands for a broker's certificate
    return client_stores(make_ca(workdir / "ca"), "alice", server, workdir / "alice", "store-pass", "key-pass")


def _keytool_certificates(path: Path, password: str) -> list[bytes]:
    listed = subprocess.run([str(Path(_java()).with_name("keytool")), "-list", "-rfc", "-keystore", str(path),
                             "-storepass", password], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stdout
    return [x509.load_pem_x509_certificate(pem.encode()).public_bytes(Encoding.DER) for pem in
            re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", listed.stdout, re.S)]


@pytest.mark.parametrize("name, key_password", [("keystore.jks", "key-pass"), ("keystore.p12", None),
                                                ("truststore.jks", None), ("truststore.p12", None)])
def test_a_store_reads_as_keytool_lists_it(stores, name, key_password):
    store = read_key_store(str(stores[name]), "store-pass", key_password)
    assert sorted(set(store.certificates)) == sorted(set(_keytool_certificates(stores[name], "store-pass")))
    if name.startswith("keystore"):
        key = load_pem_private_key(store.key_pem().encode(), None)
        own = x509.load_der_x509_certificate(store.chain[0])
        assert own.subject.rfc4514_string() == "CN=alice,O=kstool tests"
        assert key.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo) == \
            own.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    else:
        assert store.key is None


def test_wrong_passwords_and_other_stores_are_refused_in_one_line(stores, tmp_path):
    jks, p12 = str(stores["keystore.jks"]), str(stores["keystore.p12"])
    cases = {
        (jks, "wrong", "key-pass"): f"cannot open key store {jks}: wrong password (the store's integrity check failed)",
        (jks, "store-pass", "wrong"): f"cannot open the private key in key store {jks}: wrong key password "
                                      "(ssl.key.password)",
        (p12, "wrong", None): f"cannot open key store {p12}: wrong password",
        (str(tmp_path / "none.jks"), "x", None): f"cannot read key store {tmp_path / 'none.jks'}: No such file or directory",
    }
    jceks = tmp_path / "old.jceks"
    jceks.write_bytes(bytes.fromhex("cececece00000002"))
    cases[(str(jceks), "x", None)] = (f"key store {jceks} is a JCEKS store: convert it to PKCS12 (keytool "
                                      "-importkeystore -deststoretype PKCS12)")
    for (path, password, key_password), said in cases.items():
        with pytest.raises(KeyStoreError) as refused:
            read_key_store(path, password, key_password)
        assert str(refused.value) == said
