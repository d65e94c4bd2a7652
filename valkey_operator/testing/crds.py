"""Install CustomResourceDefinitions into a test API server and wait until they serve.

The one way tests, benchmarks and plugin users install the product's CRDs
(`crds/*.yaml` of this checkout by default): server-side apply, then wait
until every one is Established.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import yaml

from valkey_operator.core.client import Client
from valkey_operator.core.conditions import is_true
from valkey_operator.core.resource import CUSTOM_RESOURCE_DEFINITIONS
from valkey_operator.core.rest import Obj
from valkey_operator.testing.wait import NotYet, eventually

CRD_DIR = Path(__file__).resolve().parents[2] / "crds"


def product_crds() -> list[Path]:
    """The operator's own CRD files (crds/*.yaml of this checkout)."""
    return sorted(CRD_DIR.glob("*.yaml"))


def load_manifests(paths: Iterable[Path]) -> list[Obj]:
    documents: list[Obj] = []
    for path in paths:
        documents.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return documents


async def install_crds(
    client: Client, paths: Iterable[Path] | None = None, timeout: float = 60.0
) -> list[Obj]:
    """Server-side apply every CRD in paths (default: the product's); return once all are Established."""
    documents = load_manifests(product_crds() if paths is None else paths)
    crds = [doc for doc in documents if doc.get("kind") == "CustomResourceDefinition"]
    for crd in crds:
        await client.apply(CUSTOM_RESOURCE_DEFINITIONS, crd)

    async def established() -> object:
        waiting = []
        for crd in crds:
            current = await client.get(CUSTOM_RESOURCE_DEFINITIONS, crd["metadata"]["name"])
            if not is_true(current.get("status", {}).get("conditions"), "Established"):
                waiting.append(crd["metadata"]["name"])
        return NotYet(waiting) if waiting else True

    await eventually(established, "the CRDs Established", timeout, interval=0.1)
    return crds
