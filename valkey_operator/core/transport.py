"""How RestClient's requests reach the API server: our own aiohttp session built from a RestConfig,
or an embedder's kubernetes-asyncio ApiClient (duck-typed, so the core never imports it).

Our session is made on the first request, inside the running loop, with `trust_env=False`: the
proxy is decided once here, not looked up (with two thread hops) on every request. The TLS context
is built once; certificate and key *data* pass through private temporary files that are removed as
soon as the context has loaded them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import ssl
import urllib.request
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode, urlsplit

import aiohttp
import orjson

from valkey_operator.core.clock import Clock
from valkey_operator.core.credentials import token_source
from valkey_operator.core.memfile import memory_file
from valkey_operator.core.restconfig import PROXY_SCHEMES, ConfigError, RestConfig

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

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
    """One aiohttp session to config's server, made lazily; a 401 refreshes the token and retries once."""

    def __init__(self, config: RestConfig, clock: Clock | None = None) -> None:
        self.config = config
        self._base = config.server.rstrip("/")
        self._ssl = tls_context(config) if config.server.startswith("https:") else None
        self._proxy = proxy_for(config)
        self._tokens = token_source(config, clock)
        self._session: aiohttp.ClientSession | None = None

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=CONNECTIONS, ssl=self._ssl or True)
            self._session = aiohttp.ClientSession(
                connector=connector, trust_env=False, read_bufsize=READ_BUFFER
            )
        return self._session

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
        token = await self._tokens.token() if self._tokens else None
        response = await self._request(method, url, headers, data, timeout, token)
        if response.status == 401 and self._tokens and token:
            try:
                fresh = await self._tokens.rejected(token)
            except BaseException:
                response.release()
                raise
            if fresh:
                response.release()
                token = await self._tokens.token()
                response = await self._request(method, url, headers, data, timeout, token)
        return response

    async def _request(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        data: bytes | None,
        timeout: Timeout,
        token: str | None,
    ) -> aiohttp.ClientResponse:
        headers = {"User-Agent": USER_AGENT, **headers}
        if token:
            headers["Authorization"] = f"Bearer {token}"
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


def proxy_for(config: RestConfig) -> str | None:
    """The kubeconfig's proxy-url, else the environment's proxy for the server (Go's rules: never
    for a loopback server, and no_proxy is honoured)."""
    if config.proxy_url:
        return config.proxy_url
    server = urlsplit(config.server)
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
    """The CA (file or PEM data; the system's roots without either) and the client certificate."""
    try:
        ca_data = config.ca_data.decode() if config.ca_data else None
        context = ssl.create_default_context(cafile=config.ca_file, cadata=ca_data)
        if config.insecure_skip_tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if config.cert_file or config.cert_data:
            with _pem_files(config) as (cert, key):
                context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"TLS set-up for {config.server}: {exc}") from None
    return context


@contextlib.contextmanager
def _pem_files(config: RestConfig) -> Iterator[tuple[str, str]]:
    """The client certificate and key as file paths (load_cert_chain reads only files); data is
    held in memory files (memfile.py), so a kubeconfig with certificate data works on a read-only
    root."""
    with contextlib.ExitStack() as stack:
        paths = []
        for data, file, name in (
            (config.cert_data, config.cert_file, "tls.crt"),
            (config.key_data, config.key_file, "tls.key"),
        ):
            paths.append(str(file) if data is None else stack.enter_context(memory_file(name, data)))
        yield paths[0], paths[1]
