"""Raw JSON requests to the API server, answers decoded with orjson.

The core caches plain dicts, not generated model objects (SPEC section 6). Requests go through
our own aiohttp transport built from a kubernetes-asyncio Configuration (a RestConfig), or through
an embedder's kubernetes-asyncio `ApiClient.call_api(..., _preload_content=False)`; see
transport.py. Neither needs kubernetes-asyncio's generated models.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, cast

import aiohttp
import orjson

from valkey_operator.core.transport import ApiClientTransport, HttpTransport, Transport

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

    from valkey_operator.core.restconfig import RestConfig

Obj = dict[str, Any]
"""A Kubernetes object as decoded JSON."""

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
"""Built-in kinds only: lists merge by their key (a pod's containers by name)."""
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
# Accept headers that make the API server answer with metadata only (client-go's metadata client).
PARTIAL_OBJECT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PARTIAL_OBJECT_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


LARGE_BODY = 256 * 1024
"""Bodies from this size on are decoded with the cyclic garbage collector paused."""


def decode(data: bytes) -> Any:
    """orjson.loads; for a large body (a LIST) with the cyclic collector paused.

    Decoded JSON holds no reference cycles, yet allocating its containers
    triggers a collection every 700 of them, each walking a heap that grows
    by the thousands: that tripled the decode time of a 10,000-object LIST
    (150 ms -> 46 ms, docs/performance.md). The collector runs again after.
    """
    if len(data) < LARGE_BODY or not gc.isenabled():
        return orjson.loads(data)
    gc.disable()
    try:
        return orjson.loads(data)
    finally:
        gc.enable()


class ApiError(Exception):
    """A non-2xx answer from the API server, with its Status fields."""

    def __init__(self, status: int, body: bytes | str) -> None:
        self.status = status
        self.body: Obj = {}
        try:
            decoded = orjson.loads(body) if body else {}
            if isinstance(decoded, dict):
                self.body = decoded
        except orjson.JSONDecodeError:
            pass
        self.reason: str = self.body.get("reason", "")
        self.message: str = self.body.get(
            "message", body.decode(errors="replace") if isinstance(body, bytes) else body
        )
        super().__init__(f"{status} {self.reason}: {self.message}")

    @property
    def not_found(self) -> bool:
        """404: the object (or its namespace) does not exist."""
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """409 Conflict: the resourceVersion written from is stale; re-read and retry."""
        return self.status == 409 and self.reason == "Conflict"

    @property
    def already_exists(self) -> bool:
        """409 AlreadyExists: a create of a name that is taken."""
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        """410: the requested resourceVersion is too old (watch must relist)."""
        return self.status == 410


Query = Mapping[str, str | int | bool | None]


def _query_pairs(query: Query | None) -> list[tuple[str, str]]:
    pairs = []
    for key, value in (query or {}).items():
        if value is None:
            continue
        pairs.append((key, str(value).lower() if isinstance(value, bool) else str(value)))
    return pairs


class TransportError(ConnectionError):
    """The request got no answer: connection refused or reset, TLS failure, or a timeout. Transient:
    retry it (leader election counts it as a failed attempt, reconciles requeue with backoff)."""


class RestClient:
    """JSON in, JSON out, over our own session (a RestConfig: kubernetes-asyncio's Configuration)
    or an embedder's kubernetes-asyncio ApiClient. `close()` (or `async with`) closes the session it
    made; an ApiClient's owner closes that one."""

    def __init__(self, api_client: RestConfig | ApiClient) -> None:
        self.transport: Transport
        if hasattr(api_client, "get_api_key_with_prefix"):  # duck-typed: kubernetes-asyncio is not
            self.transport = HttpTransport(cast("RestConfig", api_client))  # imported by the core
        else:
            self.transport = ApiClientTransport(api_client)

    async def close(self) -> None:
        await self.transport.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def _send(
        self,
        method: str,
        path: str,
        query: Query | None,
        body: Any,
        content_type: str,
        timeout: float | aiohttp.ClientTimeout | None,
        accept: str = JSON,
    ) -> aiohttp.ClientResponse:
        headers = {"Accept": accept, "Content-Type": content_type}
        return await self.transport.send(method, path, _query_pairs(query), headers, body, timeout)

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = 30.0,
        accept: str = JSON,
    ) -> Obj:
        """Send one request; return the decoded body or raise ApiError.

        `accept` selects another JSON form of the answer (e.g. PARTIAL_OBJECT_METADATA_LIST).
        """
        try:
            response = await self._send(method, path, query, body, content_type, timeout, accept)
            async with response:
                data = await response.read()
        except (aiohttp.ClientError, OSError) as exc:  # TimeoutError is an OSError
            raise TransportError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if not 200 <= response.status <= 299:
            raise ApiError(response.status, data)
        decoded: Obj = decode(data) if data else {}
        return decoded

    @contextlib.asynccontextmanager
    async def stream(
        self,
        path: str,
        *,
        query: Query | None = None,
        timeout: aiohttp.ClientTimeout | None = None,
        accept: str = JSON,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """A GET whose body is read incrementally (watches); raises ApiError on non-2xx."""
        response = await self._send("GET", path, query, None, JSON, timeout, accept)
        async with response:
            if not 200 <= response.status <= 299:
                raise ApiError(response.status, await response.read())
            yield response
