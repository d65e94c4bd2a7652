"""Secure serving of /metrics: HTTPS, and only for callers the API server says may `get /metrics`.

As controller-runtime's secure metrics serving does: the caller's bearer token goes to a TokenReview
(who is it?) and that user to a SubjectAccessReview for the non-resource URL (may it read /metrics?).
Answers are kept for a minute per token, so a scrape every 30 s costs the API server one pair of
reviews a minute per scraper. The certificate is self-signed, made at start in memory: scrapers
verify the caller's right, not the server's name (`insecureSkipVerify` in the ServiceMonitor).
"""

from __future__ import annotations

import datetime
import hashlib
import ssl

import attrs
import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from valkey_operator.core.clock import Clock
from valkey_operator.core.memfile import memory_file
from valkey_operator.core.rest import ApiError, RestClient, TransportError

log = structlog.get_logger(__name__)

CACHE_SECONDS = 60.0
CACHE_ENTRIES = 256
"""Scrapers are few; the bound keeps a flood of made-up tokens from growing memory."""


@attrs.frozen
class Verdict:
    status: int
    """200 allowed, 401 no or invalid token, 403 a valid caller without the right."""
    user: str = ""


class MetricsAuthorizer:
    """TokenReview + SubjectAccessReview against the API server, answers cached per token."""

    def __init__(self, rest: RestClient, clock: Clock, path: str = "/metrics") -> None:
        self.rest = rest
        self.path = path
        self.clock = clock
        self._cache: dict[str, tuple[float, Verdict]] = {}

    async def check(self, authorization: str | None) -> Verdict:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return Verdict(401)
        key = hashlib.sha256(token.strip().encode()).hexdigest()
        now = self.clock.now()
        cached = self._cache.get(key)
        if cached and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        verdict = await self._review(token.strip())
        if len(self._cache) >= CACHE_ENTRIES:
            self._cache = {k: v for k, v in self._cache.items() if now - v[0] < CACHE_SECONDS}
            if len(self._cache) >= CACHE_ENTRIES:
                self._cache.clear()
        self._cache[key] = (now, verdict)
        return verdict

    async def _review(self, token: str) -> Verdict:
        review = await self.rest.request(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return Verdict(401)
        user = status.get("user") or {}
        spec = {
            "user": user.get("username", ""),
            "groups": user.get("groups") or [],
            "uid": user.get("uid", ""),
            "extra": user.get("extra") or {},
            "nonResourceAttributes": {"path": self.path, "verb": "get"},
        }
        access = await self.rest.request(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            body={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        allowed = bool((access.get("status") or {}).get("allowed"))
        return Verdict(200 if allowed else 403, spec["user"])


def guarded(authorizer: MetricsAuthorizer) -> Middleware:
    """An aiohttp middleware that answers 401/403 (or 503 when the API server cannot say) before
    the handler runs."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            verdict = await authorizer.check(request.headers.get("Authorization"))
        except (ApiError, TransportError) as error:
            log.warning("metrics authorization unavailable", error=str(error))
            return web.Response(status=503, text="authorization unavailable\n")
        if verdict.status == 401:
            return web.Response(status=401, text="unauthorized\n", headers={"WWW-Authenticate": "Bearer"})
        if verdict.status == 403:
            log.info("metrics read refused", user=verdict.user)
            return web.Response(status=403, text=f"forbidden: {verdict.user} may not get {authorizer.path}\n")
        return await handler(request)

    return middleware


def self_signed_context(host: str, clock: Clock) -> ssl.SSLContext:
    """A server context with a fresh self-signed ECDSA certificate for host, valid a year."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "valkey-operator-metrics")])
    now = datetime.datetime.fromtimestamp(clock.wall(), datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
    )
    builder = builder.add_extension(x509.SubjectAlternativeName(_alt_names(host)), critical=False)
    certificate = builder.sign(key, hashes.SHA256())
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    cert_pem = certificate.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with memory_file("metrics.crt", cert_pem) as cert_path, memory_file("metrics.key", key_pem) as key_path:
        context.load_cert_chain(cert_path, key_path)
    return context


def _alt_names(host: str) -> list[x509.GeneralName]:
    import ipaddress

    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    try:
        names.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        if host:
            names.append(x509.DNSName(host))
    return names
