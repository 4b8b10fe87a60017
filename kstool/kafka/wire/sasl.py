"""SASL for kstool's own Kafka client (kstool.kafka.wire.protocol): PLAIN, SCRAM-SHA-256/512
(RFC 5802, RFC 7677) and OAUTHBEARER with a token of an OIDC endpoint (RFC 7628,
kstool.kafka.oauth), as Kafka's SaslHandshake v1 and SaslAuthenticate v1 carry them. GSSAPI is
librdkafka's alone."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import TYPE_CHECKING, Any, Callable

from kstool.kafka.exceptions import AuthenticationError
from kstool.kafka.oauth import client_credentials_token
from kstool.kafka.wire.codec import encode_bytes, encode_string

if TYPE_CHECKING:
    from kstool.kafka.wire.protocol import Connection

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SCRAM_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
MECHANISMS = ("PLAIN", *SCRAM_HASHES, "OAUTHBEARER")


def authenticate(conn: "Connection", mechanism: str, common: dict[str, str], timeout_s: float) -> None:
    """Log in on a fresh connection with the client's settings (librdkafka's names);
    AuthenticationError with the broker's reason if refused."""
    username, password = common.get("sasl.username", ""), common.get("sasl.password", "")
    reply = conn.call(SASL_HANDSHAKE, 1, encode_string(mechanism))
    error = reply.take(">h")
    enabled = [reply.string() for _ in range(reply.take(">i"))]
    if error:
        raise AuthenticationError(f"the broker does not take SASL {mechanism} (it takes {', '.join(map(str, enabled))})")
    if mechanism == "PLAIN":
        _exchange(conn, b"\0" + username.encode() + b"\0" + password.encode())
        return
    if mechanism == "OAUTHBEARER":
        _oauthbearer(conn, common, timeout_s)
        return
    _scram(conn, SCRAM_HASHES[mechanism], username, password)


def _oauthbearer(conn: "Connection", common: dict[str, str], timeout_s: float) -> None:
    """RFC 7628's initial response with the bearer token. A broker that refuses the token
    answers with an error challenge (JSON), which the client acknowledges with 0x01; its
    SaslAuthenticate error then says why."""
    if "sasl.oauthbearer.token.endpoint.url" not in common:
        raise AuthenticationError("kstool's own Kafka client takes OAUTHBEARER tokens from an OIDC token endpoint "
                                  "(sasl.oauthbearer.token.endpoint.url) only")
    token = client_credentials_token(common, timeout_s)
    challenge = _exchange(conn, b"n,,\x01auth=Bearer " + token.value.encode() + b"\x01\x01")
    if challenge:
        _exchange(conn, b"\x01")
        raise AuthenticationError(f"the broker refused the token: {challenge.decode(errors='replace')}")


def _exchange(conn: "Connection", message: bytes) -> bytes:
    reply = conn.call(SASL_AUTHENTICATE, 1, encode_bytes(message))
    error, reason = reply.take(">h"), reply.string()
    answer = reply.bytes()
    if error:
        raise AuthenticationError(f"the broker refused the credentials: {reason or f'error {error}'}")
    return answer


def _scram(conn: "Connection", digest: Callable[..., Any], username: str, password: str) -> None:
    nonce = secrets.token_urlsafe(18)
    first_bare = f"n={username.replace('=', '=3D').replace(',', '=2C')},r={nonce}"
    server_first = _exchange(conn, ("n,," + first_bare).encode()).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    if not fields.get("r", "").startswith(nonce):
        raise AuthenticationError("the broker's SCRAM answer does not carry kstool's nonce")
    salted = hashlib.pbkdf2_hmac(digest().name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    final_bare = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{final_bare}".encode()
    signature = hmac.new(digest(client_key).digest(), auth_message, digest).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    server_final = _exchange(conn, f"{final_bare},p={base64.b64encode(proof).decode()}".encode()).decode()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    expected = base64.b64encode(hmac.new(server_key, auth_message, digest).digest()).decode()
    if server_final != f"v={expected}":
        raise AuthenticationError("the broker's SCRAM signature is wrong: it is not the broker that holds the credentials")
