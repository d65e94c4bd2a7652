"""Install CustomResourceDefinitions into a test API server and wait until they serve.

The one way tests, benchmarks and plugin users install the product's CRDs
(`crds/*.yaml` of this checkout by default): server-side apply, then wait
until every one is Established.

Hundreds of tests ask for the CRDs, so asking again is cheap: the files are parsed once per
content, and a CRD whose server state is one this process saw Established after applying the same
manifest (same uid, resourceVersion and manifest) is not applied again; anything else, including a
CRD someone replaced or deleted since, is.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import yaml

from valkey_operator.core.client import Client
from valkey_operator.core.conditions import is_true
from valkey_operator.core.resource import CUSTOM_RESOURCE_DEFINITIONS
from valkey_operator.core.rest import Obj
from valkey_testbed.wait import NotYet, eventually

CRD_DIR = Path(__file__).resolve().parents[2] / "crds"


def product_crds() -> list[Path]:
    """The operator's own CRD files (crds/*.yaml of this checkout)."""
    return sorted(CRD_DIR.glob("*.yaml"))


def load_manifests(paths: Iterable[Path]) -> list[Obj]:
    """Every document of the files, in order (a copy: callers may change it)."""
    documents: list[Obj] = []
    for path in paths:
        documents.extend(copy.deepcopy(_parsed(path.read_text())))
    return documents


@functools.lru_cache(maxsize=64)
def _parsed(text: str) -> tuple[Obj, ...]:
    """A file's documents, parsed once per content (the product's CRDs take ~0.2 s of YAML)."""
    return tuple(doc for doc in yaml.safe_load_all(text) if doc)


_SETTLED: set[tuple[str, str, str]] = set()
"""(uid, resourceVersion, manifest digest) of CRDs seen Established after applying that manifest."""


def _digest(crd: Obj) -> str:
    return hashlib.sha256(json.dumps(crd, sort_keys=True).encode()).hexdigest()


async def install_crds(
    client: Client, paths: Iterable[Path] | None = None, timeout: float = 60.0
) -> list[Obj]:
    """Server-side apply every CRD in paths (default: the product's); return once all are Established."""
    documents = load_manifests(product_crds() if paths is None else paths)
    crds = [doc for doc in documents if doc.get("kind") == "CustomResourceDefinition"]
    digests = {crd["metadata"]["name"]: _digest(crd) for crd in crds}
    applied = 0
    for crd in crds:
        name = crd["metadata"]["name"]
        current = await client.get_or_none(CUSTOM_RESOURCE_DEFINITIONS, name)
        if current is None or _state(current, digests[name]) not in _SETTLED:
            await client.apply(CUSTOM_RESOURCE_DEFINITIONS, crd)
            applied += 1
    if not applied:  # each is in a state seen Established (a status change moves resourceVersion)
        return crds

    async def established() -> object:
        waiting = []
        for crd in crds:
            name = crd["metadata"]["name"]
            current = await client.get(CUSTOM_RESOURCE_DEFINITIONS, name)
            if is_true(current.get("status", {}).get("conditions"), "Established"):
                _SETTLED.add(_state(current, digests[name]))
            else:
                waiting.append(name)
        return NotYet(waiting) if waiting else True

    await eventually(established, "the CRDs Established", timeout, interval=0.1)
    return crds


def _state(crd: Obj, digest: str) -> tuple[str, str, str]:
    return (crd["metadata"]["uid"], crd["metadata"]["resourceVersion"], digest)
