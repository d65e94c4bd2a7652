"""Finalizer helpers without a server: what each writes, and a gone object (404) as success.

The API server's side (resourceVersion guards, deletion completing) is in
tests/integration/core/test_client.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from valkey_operator.core.client import Client
from valkey_operator.core.finalizers import add_finalizer, has_finalizer, remove_finalizer
from valkey_operator.core.resource import CONFIG_MAPS
from valkey_operator.core.rest import ApiError, Obj, RestClient

GONE = b'{"kind":"Status","status":"Failure","reason":"NotFound","message":"configmaps \\"x\\" not found"}'


class Answers(RestClient):
    """Answers every request with one status (the object's deletion completed: 404), recording it."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(api_client=None)  # never used: no HTTP here
        self.status, self.body = status, body
        self.requests: list[tuple[str, str, Any]] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> Obj:
        self.requests.append((method, path, kwargs.get("body")))
        raise ApiError(self.status, self.body)


def terminating(*finalizers: str) -> Obj:
    metadata = {"name": "x", "namespace": "ns", "resourceVersion": "7", "finalizers": list(finalizers)}
    return {"metadata": {**metadata, "deletionTimestamp": "2026-12-03T10:00:00Z"}}


async def test_removing_from_an_object_already_gone_is_success() -> None:
    """The cache still shows the Terminating object; its deletion completed meanwhile."""
    rest = Answers(404, GONE)
    client = Client(rest, "test")
    assert await remove_finalizer(client, CONFIG_MAPS, terminating("ours"), "ours") is None
    method, path, body = rest.requests[0]
    assert (method, path) == ("PATCH", "/api/v1/namespaces/ns/configmaps/x")
    assert body == {"metadata": {"finalizers": [], "resourceVersion": "7"}}
    with pytest.raises(ApiError) as raised:
        await remove_finalizer(client, CONFIG_MAPS, terminating("ours"), "ours", ignore_not_found=False)
    assert raised.value.not_found


async def test_a_conflict_is_raised_not_ignored() -> None:
    client = Client(Answers(409, b'{"reason":"Conflict","message":"the object has been modified"}'), "t")
    with pytest.raises(ApiError) as raised:
        await remove_finalizer(client, CONFIG_MAPS, terminating("ours", "theirs"), "ours")
    assert raised.value.conflict


async def test_nothing_is_written_when_nothing_changes() -> None:
    rest = Answers(500, b"")
    client = Client(rest, "test")
    obj = terminating("theirs")
    assert await remove_finalizer(client, CONFIG_MAPS, obj, "ours") is obj
    assert await add_finalizer(client, CONFIG_MAPS, obj, "theirs") is obj
    assert rest.requests == [] and has_finalizer(obj, "theirs") and not has_finalizer(obj, "ours")
