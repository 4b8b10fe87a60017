"""OAuth client credentials (RFC 6749 4.4) at an OIDC token endpoint, as librdkafka's
`sasl.oauthbearer.method=oidc` and Kafka's OAuthBearerLoginCallbackHandler get their tokens:
for kstool's own client (kstool.kafka.wire.sasl) and to say why a broker refused a token."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any

from kstool.kafka.exceptions import AuthenticationError

_EARLY_S = 30  # a cached token is fetched again this long before it expires


@dataclass(frozen=True)
class Token:
    value: str
    expires_at: float  # epoch seconds: the token's exp claim, else the endpoint's expires_in

    def claims(self) -> dict[str, Any]:
        """The JWT's payload, unverified (the broker verifies it): what it says about itself."""
        try:
            payload = self.value.split(".")[1]
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (IndexError, ValueError):
            return {}
        return claims if isinstance(claims, dict) else {}


_cache: dict[tuple[str, str, str], Token] = {}


def client_credentials_token(common: dict[str, str], timeout_s: float, fresh: bool = False) -> Token:
    """A token for the client id and secret in librdkafka's settings (cached until shortly
    before it expires, unless `fresh`); AuthenticationError in one line when the endpoint refuses."""
    import urllib.error  # here: most commands never log in with OAuth (~25 ms to import)
    import urllib.parse
    import urllib.request

    url, client = common["sasl.oauthbearer.token.endpoint.url"], common.get("sasl.oauthbearer.client.id", "")
    scope = common.get("sasl.oauthbearer.scope", "")
    cached = _cache.get((url, client, scope))
    if not fresh and cached is not None and cached.expires_at - _EARLY_S > time.time():
        return cached
    secret = common.get("sasl.oauthbearer.client.secret", "")
    basic = base64.b64encode(f"{urllib.parse.quote_plus(client)}:{urllib.parse.quote_plus(secret)}".encode()).decode()
    form = {"grant_type": "client_credentials", **({"scope": scope} if scope else {})}
    request = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(), method="POST",
                                     headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                                              "Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise AuthenticationError(f"the token endpoint {url} refused client {client}: HTTP {exc.code} "
                                  f"{_oauth_error(exc)}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise AuthenticationError(f"no token from {url} for client {client}: {getattr(exc, 'reason', exc)}") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str):
        raise AuthenticationError(f"the token endpoint {url} answered client {client} without an access_token")
    token = Token(answer["access_token"], time.time() + float(answer.get("expires_in") or 0))
    exp = token.claims().get("exp")
    if isinstance(exp, (int, float)):
        token = Token(token.value, float(exp))
    _cache[(url, client, scope)] = token
    return token


def _oauth_error(exc: Any) -> str:
    """An endpoint's OAuth error (RFC 6749 5.2) from its HTTPError, or the HTTP reason."""
    try:
        body = json.loads(exc.read())
        return " ".join(str(body[k]) for k in ("error", "error_description") if body.get(k))
    except (ValueError, OSError):
        return str(exc.reason)


def expired_tokens(common: dict[str, str], timeout_s: float) -> str | None:
    """Why no token was taken, found by asking the endpoint for one: its tokens have expired
    when issued (an identity provider's clock). AuthenticationError when the endpoint refuses
    the client."""
    token = client_credentials_token(common, timeout_s, fresh=True)
    exp = token.claims().get("exp")
    if isinstance(exp, (int, float)) and exp <= time.time():
        issued = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(exp))
        return (f"the token endpoint {common['sasl.oauthbearer.token.endpoint.url']} gives client "
                f"{common.get('sasl.oauthbearer.client.id', '')} tokens that have expired (exp {issued}, "
                f"{time.time() - exp:.0f} s ago)")
    return None
