"""Install CustomResourceDefinitions into a test API server and wait until they serve."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

import yaml

from valkey_operator.core.client import Client
from valkey_operator.core.conditions import is_true
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj

CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)


def load_manifests(paths: Iterable[Path]) -> list[Obj]:
    documents: list[Obj] = []
    for path in paths:
        documents.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return documents


async def install_crds(client: Client, paths: Iterable[Path], timeout: float = 60.0) -> list[Obj]:
    """Server-side apply every CRD in paths; return once all are Established."""
    crds = [doc for doc in load_manifests(paths) if doc.get("kind") == "CustomResourceDefinition"]
    for crd in crds:
        await client.apply(CUSTOM_RESOURCE_DEFINITIONS, crd)
    async with asyncio.timeout(timeout):
        for crd in crds:
            while True:
                current = await client.get(CUSTOM_RESOURCE_DEFINITIONS, crd["metadata"]["name"])
                if is_true(current.get("status", {}).get("conditions"), "Established"):
                    break
                await asyncio.sleep(0.1)
    return crds
