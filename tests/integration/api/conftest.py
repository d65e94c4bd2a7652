"""Fixtures for the API tests: the CRDs installed, the real kubectl, and cleanup of cluster-scoped objects."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest_asyncio

from valkey_operator.core.client import Client
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj
from valkey_testbed.controlplane import ControlPlane

Kubectl = Callable[..., Awaitable[tuple[int, str, str]]]


@pytest_asyncio.fixture
async def api(kube: Client, valkey_crds: None) -> AsyncIterator[Client]:
    """The JSON client, with the product's CRDs installed and Established."""
    yield kube


@pytest_asyncio.fixture
async def kubectl(kube_control_plane: ControlPlane, kubeconfig_path: Path) -> AsyncIterator[Kubectl]:
    """Run the test bed's real kubectl binary: (returncode, stdout, stderr)."""

    async def run(*args: str, stdin: str | None = None, timeout: float = 30.0) -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            str(kube_control_plane.bins.kubectl),
            f"--kubeconfig={kubeconfig_path}",
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            async with asyncio.timeout(timeout):
                out, err = await process.communicate(stdin.encode() if stdin is not None else None)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
        assert process.returncode is not None
        return process.returncode, out.decode(), err.decode()

    yield run


class Created:
    """Objects a test created for real; deleted (finalizers cleared) when the test ends."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.objects: list[tuple[Resource, str, str | None]] = []

    async def create(self, resource: Resource, obj: Obj) -> Obj:
        created = await self.client.create(resource, copy.deepcopy(obj))
        self.objects.append((resource, obj["metadata"]["name"], obj["metadata"].get("namespace")))
        return created

    async def delete_all(self) -> None:
        for resource, name, namespace in reversed(self.objects):
            current = await self.client.get_or_none(resource, name, namespace)
            if current is None:
                continue
            if current["metadata"].get("finalizers"):
                await self.client.patch(resource, name, {"metadata": {"finalizers": None}}, namespace)
            await self.client.delete(resource, name, namespace)


@pytest_asyncio.fixture
async def created(api: Client) -> AsyncIterator[Created]:
    registry = Created(api)
    try:
        yield registry
    finally:
        await registry.delete_all()
