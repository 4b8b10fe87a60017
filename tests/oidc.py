"""An OpenID Connect provider for the tests' SASL/OAUTHBEARER listener, served by the test
itself: a token endpoint (OAuth client credentials, RFC 6749 4.4: HTTP Basic client id and
secret) that signs JWTs with an RSA key (RS256), and the JWKS the broker's validator
(Kafka's OAuthBearerValidatorCallbackHandler) verifies them with."""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.helpers import send_json

AUDIENCE = "kafka"
KEY_ID = "kstool-test-key"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class OidcProvider:
    """Clients (id -> secret) get tokens whose `sub` is their id, valid for `lifetime_s` (a
    negative one: expired when issued, as from an identity provider whose clock is wrong)."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.clients: dict[str, str] = {}
        self.lifetime_s = 3600
        self.issued = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                if self.path != "/jwks":
                    self.send_error(404)
                    return
                self._json(200, provider.jwks())

            def do_POST(self) -> None:
                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
                client_id, secret = provider.credentials(self.headers.get("Authorization", ""), form)
                if self.path != "/token" or form.get("grant_type") != ["client_credentials"]:
                    self._json(400, {"error": "unsupported_grant_type"})
                elif provider.clients.get(client_id) != secret:
                    self._json(401, {"error": "invalid_client"})
                else:
                    self._json(200, {"access_token": provider.token(client_id, form.get("scope", [""])[0]),
                                     "token_type": "Bearer", "expires_in": provider.lifetime_s})

            def _json(self, status: int, body: dict) -> None:
                send_json(self, status, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> "OidcProvider":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def credentials(authorization: str, form: dict[str, list[str]]) -> tuple[str, str]:
        """client_secret_basic (the Authorization header) or client_secret_post (the form)."""
        if authorization.lower().startswith("basic "):
            user, _, secret = base64.b64decode(authorization[6:]).decode().partition(":")
            return urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(secret)
        return form.get("client_id", [""])[0], form.get("client_secret", [""])[0]

    def token(self, subject: str, scope: str) -> str:
        now = int(time.time())
        claims = {"sub": subject, "iss": self.url, "aud": AUDIENCE, "iat": now, "nbf": now - 60,
                  "exp": now + self.lifetime_s, "scope": scope}
        header = {"alg": "RS256", "typ": "JWT", "kid": KEY_ID}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        self.issued += 1
        return f"{signing_input}.{_b64(signature)}"

    def jwks(self) -> dict:
        numbers = self.key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "kid": KEY_ID, "use": "sig", "alg": "RS256",
                          "n": _b64(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
                          "e": _b64(numbers.e.to_bytes(3, "big"))}]}
