"""Java key stores read as Kafka's Java client reads them (`ssl.truststore.*`, `ssl.keystore.*`):
JKS (Sun's format: its own integrity hash and key protection, sun.security.provider.JavaKeyStore
and KeyProtector) and PKCS12, told apart by their first bytes as Java's keystore.type.compat
does. What librdkafka and Python's ssl take is PEM text: a store's certificates and its key come
out as PEM in memory, never written anywhere."""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass, field
from pathlib import Path

JKS_MAGIC, JCEKS_MAGIC = 0xFEEDFEED, 0xCECECECE
_PRIVATE_KEY, _TRUSTED_CERT = 1, 2
_INTEGRITY_SALT = b"Mighty Aphrodite"  # JavaKeyStore#getPreKeyedHash
_KEY_PROTECTOR_OID = bytes.fromhex("2b060104012a02110101")  # 1.3.6.1.4.1.42.2.17.1.1, Sun's KeyProtector


class KeyStoreError(ValueError):
    """A store that cannot be read: the message says why, in one line."""


@dataclass
class KeyStore:
    certificates: list[bytes] = field(default_factory=list)  # DER: trusted certificates, then key chains'
    key: bytes | None = None  # PKCS#8 DER of the first private key
    chain: list[bytes] = field(default_factory=list)  # DER: that key's certificate chain, its own first

    def certificates_pem(self) -> str:
        return "".join(_pem("CERTIFICATE", der) for der in self.certificates)

    def chain_pem(self) -> str:
        return "".join(_pem("CERTIFICATE", der) for der in self.chain)

    def key_pem(self) -> str:
        return _pem("PRIVATE KEY", self.key) if self.key else ""


def read_key_store(path: str, password: str | None, key_password: str | None = None, what: str = "key store") -> KeyStore:
    """The store at `path` (JKS or PKCS12, whatever its name says), opened with `password`
    (JKS: its integrity check; None skips it, as Java's does) and its key with `key_password`
    (default: the store's). `what` names the store in errors (`ssl.truststore.location`)."""
    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise KeyStoreError(f"cannot read {what} {path}: {exc.strerror}") from None
    if len(data) >= 4 and struct.unpack(">I", data[:4])[0] == JKS_MAGIC:
        return _read_jks(data, path, password, key_password, what)
    if len(data) >= 4 and struct.unpack(">I", data[:4])[0] == JCEKS_MAGIC:
        raise KeyStoreError(f"{what} {path} is a JCEKS store: convert it to PKCS12 (keytool -importkeystore "
                            "-deststoretype PKCS12)")
    return _read_pkcs12(data, path, password, key_password, what)


def _read_pkcs12(data: bytes, path: str, password: str | None, key_password: str | None, what: str) -> KeyStore:
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12

    if not data.startswith(b"\x30"):
        raise KeyStoreError(f"{what} {path} is neither a JKS nor a PKCS12 store")
    loaded, error = None, ""
    for candidate in dict.fromkeys([password, key_password]):  # Java's PKCS12 keys share the store's password
        try:
            loaded = pkcs12.load_pkcs12(data, None if candidate is None else candidate.encode())
            break
        except ValueError as exc:
            error = str(exc)
    if loaded is None:
        wrong = "wrong password" if "password" in error.lower() or "mac" in error.lower() else error
        raise KeyStoreError(f"cannot open {what} {path}: {wrong}")
    own = [loaded.cert.certificate.public_bytes(Encoding.DER)] if loaded.cert is not None else []
    store = KeyStore(certificates=own + [c.certificate.public_bytes(Encoding.DER) for c in loaded.additional_certs])
    if loaded.key is not None and own:
        store.key = loaded.key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption())
        store.chain = store.certificates
    return store


class _Reader:
    def __init__(self, data: bytes, path: str, what: str):
        self.data, self.at, self.path, self.what = data, 0, path, what

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise KeyStoreError(f"{self.what} {self.path} is not a whole JKS store (it ends too soon)")
        self.at += n
        return self.data[self.at - n:self.at]

    def u16(self) -> int:
        return int(struct.unpack(">H", self.take(2))[0])

    def u32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])

    def text(self) -> str:  # DataInput#readUTF: a length, then (modified) UTF-8
        return self.take(self.u16()).decode("utf-8", "replace")

    def blob(self) -> bytes:
        return self.take(self.u32())


def _read_jks(data: bytes, path: str, password: str | None, key_password: str | None, what: str) -> KeyStore:
    reader = _Reader(data, path, what)
    reader.take(4)  # magic
    version = reader.u32()
    store = KeyStore()
    for _ in range(reader.u32()):
        tag = reader.u32()
        reader.text()  # alias
        reader.take(8)  # creation date
        if tag == _TRUSTED_CERT:
            if version == 2:
                reader.text()  # certificate type: X.509
            store.certificates.append(reader.blob())
        elif tag == _PRIVATE_KEY:
            protected = reader.blob()
            chain = []
            for _ in range(reader.u32()):
                if version == 2:
                    reader.text()
                chain.append(reader.blob())
            if store.key is None:  # the first key entry: Kafka's client takes one
                secret = key_password if key_password is not None else password
                if secret is None:
                    raise KeyStoreError(f"{what} {path} holds a private key: give its password (ssl.key.password)")
                store.key, store.chain = _recover_key(protected, secret, path, what), chain
            store.certificates += chain
        else:
            raise KeyStoreError(f"{what} {path} has an entry of unknown kind {tag}")
    digest = reader.take(20)
    if password is not None:
        expected = hashlib.sha1(password.encode("utf-16-be") + _INTEGRITY_SALT + data[:reader.at - 20]).digest()
        if not hmac.compare_digest(digest, expected):
            raise KeyStoreError(f"cannot open {what} {path}: wrong password (the store's integrity check failed)")
    return store


def _recover_key(protected: bytes, password: str, path: str, what: str) -> bytes:
    """KeyProtector#recover: an EncryptedPrivateKeyInfo whose data is salt (20 bytes), the key
    XORed with SHA-1(password + previous digest) blocks, then SHA-1(password + key)."""
    algorithm, encrypted = _encrypted_private_key_info(protected, path, what)
    if _KEY_PROTECTOR_OID not in algorithm:
        raise KeyStoreError(f"{what} {path} protects its key with an algorithm other than JKS's: convert the "
                            "store to PKCS12 (keytool -importkeystore -deststoretype PKCS12)")
    secret = password.encode("utf-16-be")
    salt, body, check = encrypted[:20], encrypted[20:-20], encrypted[-20:]
    stream, digest = b"", salt
    while len(stream) < len(body):
        digest = hashlib.sha1(secret + digest).digest()
        stream += digest
    key = bytes(a ^ b for a, b in zip(body, stream))
    if not hmac.compare_digest(hashlib.sha1(secret + key).digest(), check):
        raise KeyStoreError(f"cannot open the private key in {what} {path}: wrong key password (ssl.key.password)")
    return key


def _encrypted_private_key_info(der: bytes, path: str, what: str) -> tuple[bytes, bytes]:
    """SEQUENCE { AlgorithmIdentifier, OCTET STRING }: the algorithm's DER and the octets."""
    try:
        body, _ = _tlv(der, 0, 0x30)
        algorithm, after = _tlv(body, 0, 0x30)
        octets, _ = _tlv(body, after, 0x04)
    except (IndexError, ValueError):
        raise KeyStoreError(f"{what} {path} has a private key entry that is not an EncryptedPrivateKeyInfo") from None
    return algorithm, octets


def _tlv(der: bytes, at: int, tag: int) -> tuple[bytes, int]:
    """The contents of the DER element at `at` (which must have `tag`) and where the next begins."""
    if der[at] != tag:
        raise ValueError(f"expected tag {tag:#x} at {at}")
    length, at = der[at + 1], at + 2
    if length & 0x80:
        size = length & 0x7F
        length, at = int.from_bytes(der[at:at + size], "big"), at + size
    return der[at:at + length], at + length


def _pem(label: str, der: bytes) -> str:
    import base64
    import textwrap

    body = "\n".join(textwrap.wrap(base64.b64encode(der).decode(), 64))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"
