"""How RestClient's requests reach the API server: our own aiohttp session built from a
kubernetes-asyncio Configuration (restconfig.load_config), or an embedder's kubernetes-asyncio
ApiClient. Both read the same Configuration: kubernetes-asyncio's loaders are the one place that
knows certificates and tokens; this module only carries requests.

Why our own session when an ApiClient could carry the same requests: bench/core_transport.py
measures both over the same requests in one run (docs/performance.md has the numbers). Our session
is made on the first request, inside the running loop, with `trust_env=False` (the proxy is decided
once here, not looked up on every request), and bodies go out through orjson without
kubernetes-asyncio's walk of every value (`sanitize_for_serialization`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import ssl
import urllib.request
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode, urlsplit

import aiohttp
import orjson

from valkey_operator.core.restconfig import ConfigError, TokenRefresh

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

    from valkey_operator.core.restconfig import RestConfig

PROXY_SCHEMES = ("http", "https")
Timeout = float | aiohttp.ClientTimeout | None
CONNECTIONS = 100
"""Connections kept to the API server (kubernetes-asyncio's default pool size)."""
READ_BUFFER = 2**21
"""Large enough for one watch event of a big object (etcd's default request limit is 1.5 MiB)."""
USER_AGENT = "valkey-operator-core"


class Transport(Protocol):
    async def send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        headers: dict[str, str],
        body: Any,
        timeout: Timeout,
    ) -> aiohttp.ClientResponse:
        """One request; the response is unread (the caller reads or streams it, then releases it)."""
        ...

    async def close(self) -> None:
        """Release what this transport opened."""
        ...


class ApiClientTransport:
    """An embedder's ApiClient: its session, TLS and auth. Its owner closes it."""

    def __init__(self, api_client: ApiClient) -> None:
        self.api_client = api_client

    async def send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        headers: dict[str, str],
        body: Any,
        timeout: Timeout,
    ) -> aiohttp.ClientResponse:
        response: aiohttp.ClientResponse = await self.api_client.call_api(
            path,
            method,
            query_params=query,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )
        return response

    async def close(self) -> None:
        pass


class HttpTransport:
    """One aiohttp session to the server of a kubernetes-asyncio Configuration, made lazily, with its
    TLS, proxy and token (asked of the Configuration before each request, as kubernetes-asyncio
    does); a 401 expires the token (restconfig.TokenRefresh) and the request is retried once with a
    fresh one."""

    def __init__(self, config: RestConfig) -> None:
        self.config = config
        self._base = str(config.host).rstrip("/")
        self._ssl = tls_context(config) if self._base.startswith("https:") else None
        self._proxy = proxy_for(self._base, config.proxy)
        self._session: aiohttp.ClientSession | None = None

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=CONNECTIONS, ssl=self._ssl or True)
            self._session = aiohttp.ClientSession(
                connector=connector, trust_env=False, read_bufsize=READ_BUFFER
            )
        return self._session

    async def _authorization(self) -> str | None:
        """The Authorization header ("Bearer ..." or, from a kubeconfig's basic auth, "Basic ...")."""
        value: str | None = await self.config.get_api_key_with_prefix("BearerToken")
        return value

    async def send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        headers: dict[str, str],
        body: Any,
        timeout: Timeout,
    ) -> aiohttp.ClientResponse:
        url = self._base + path + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else orjson.dumps(body)
        authorization = await self._authorization()
        response = await self._request(method, url, headers, data, timeout, authorization)
        refresh = self.config.refresh_api_key_hook
        if response.status == 401 and authorization and isinstance(refresh, TokenRefresh):
            refresh.expire()
            try:
                fresh = await self._authorization()
            except BaseException:
                response.release()
                raise
            if fresh != authorization:
                response.release()
                response = await self._request(method, url, headers, data, timeout, fresh)
        return response

    async def _request(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        data: bytes | None,
        timeout: Timeout,
        authorization: str | None,
    ) -> aiohttp.ClientResponse:
        headers = {"User-Agent": USER_AGENT, **headers}
        if authorization:
            headers["Authorization"] = authorization
        return await self._open_session().request(
            method,
            url,
            headers=headers,
            data=data,
            timeout=client_timeout(timeout),
            proxy=self._proxy,
            server_hostname=self.config.tls_server_name,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def client_timeout(timeout: Timeout) -> aiohttp.ClientTimeout:
    """kubernetes-asyncio's reading: a number is a total; None or 0 is no limit at all."""
    if isinstance(timeout, aiohttp.ClientTimeout):
        return timeout
    return aiohttp.ClientTimeout(total=timeout) if timeout else aiohttp.ClientTimeout()


def proxy_for(server_url: str, proxy_url: str | None) -> str | None:
    """The kubeconfig's proxy-url, else the environment's proxy for the server (Go's rules: never
    for a loopback server, and no_proxy is honoured)."""
    if proxy_url:
        if urlsplit(proxy_url).scheme not in PROXY_SCHEMES:
            raise ConfigError(f"proxy-url {proxy_url!r}: only http and https proxies are supported")
        return proxy_url
    server = urlsplit(server_url)
    host = server.hostname or ""
    with contextlib.suppress(ValueError):
        if host == "localhost" or ipaddress.ip_address(host).is_loopback:
            return None
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(server.scheme)
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # not in typeshed
    if not proxy or bypass(server.netloc, proxies):
        return None
    if urlsplit(proxy).scheme not in PROXY_SCHEMES:
        raise ConfigError(f"{server.scheme}_proxy {proxy!r}: only http and https proxies are supported")
    return proxy


def tls_context(config: RestConfig) -> ssl.SSLContext:
    """The CA (the system's roots without one) and the client certificate, as kubernetes-asyncio's
    own RESTClientObject builds them from the same Configuration (its loader has already turned
    certificate data into files)."""
    try:
        context = ssl.create_default_context(cafile=config.ssl_ca_cert)
        if config.cert_file:
            context.load_cert_chain(config.cert_file, keyfile=config.key_file)
        if not config.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if config.disable_strict_ssl_verification:
            context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"TLS set-up for {config.host}: {exc}") from None
    return context
