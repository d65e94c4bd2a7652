"""No Secret value sits in the operator's cache, even one `kubectl apply` copied into an annotation.

Client-side `kubectl apply` stores the whole object it applied, data included, in the
`kubectl.kubernetes.io/last-applied-configuration` annotation. The operator watches every Secret
metadata-only (to notice when a referenced one changes): with annotations kept, it would hold
the value of every Secret so applied in the cluster. The in-process operator, wired as the real
one (controllers.CACHE_METADATA_TRANSFORMS), watches a Secret applied with the real kubectl; no
informer's cache holds the value, in any encoding, nor the annotation, and the operator still sees
the Secret change (its resourceVersion, after which ReferencedSecrets reads the new content).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from inprocess_operator import Operator
from kubernetes_asyncio import client as k8s

from controllers import SECRET_METADATA_KEPT
from controllers.cluster.secrets import ReferencedSecrets
from valkey_operator.core.client import Client
from valkey_operator.core.resource import SECRETS
from valkey_operator.core.rest import Obj
from valkey_testbed.operatorproc import kubectl
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), pytest.mark.usefixtures("valkey_crds")]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@pytest_asyncio.fixture
async def operator(kube_api: k8s.ApiClient, namespace: str) -> AsyncIterator[Operator]:
    running = Operator(kube_api, namespace, workers={"image": 1, "config": 1, "role": 1, "cluster": 1})
    await running.start()
    yield running
    await running.stop()


async def apply(kubeconfig: Path, directory: Path, namespace: str, value: str) -> None:
    """`kubectl apply` (client-side, kubectl's default) of a Secret whose password is value."""
    manifest = directory / f"{value}.yaml"
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "app-password", "namespace": namespace, "labels": {"team": "shop"}},
        "stringData": {"password": value},
    }
    manifest.write_text(json.dumps(secret))
    await asyncio.to_thread(kubectl, str(kubeconfig), "apply", "-f", str(manifest))


def holding(operator: Operator, needles: list[str]) -> list[str]:
    """Every cached object, of every informer, whose JSON holds one of needles."""
    assert operator.manager is not None
    found = []
    for informer in operator.manager.informers.informers:
        for obj in informer.store.list():
            text = json.dumps(obj)
            found += [f"{informer.resource}: {needle}" for needle in needles if needle in text]
    return found


async def cached_at(operator: Operator, namespace: str, version: str) -> Obj:
    """The Secret's metadata-only cache entry once it shows resourceVersion version."""
    assert operator.manager is not None
    cache = operator.manager.cache

    async def seen() -> Obj | NotYet:
        found = cache.get(SECRETS, "app-password", namespace, metadata_only=True)
        shown = (found or {}).get("metadata", {}).get("resourceVersion")
        return found if found is not None and shown == version else NotYet(shown)

    return await eventually(seen, f"the cache at resourceVersion {version}", 30, interval=0.05)


async def test_a_secret_applied_with_kubectl_leaves_no_value_in_the_cache_and_its_changes_are_seen(
    operator: Operator, kube: Client, namespace: str, kubeconfig_path: Path, tmp_path: Path
) -> None:
    first, second = "first-value-4f2a9c", "second-value-7be31d"
    await apply(kubeconfig_path, tmp_path, namespace, first)
    stored = await kube.get(SECRETS, "app-password", namespace)
    assert first in stored["metadata"]["annotations"][LAST_APPLIED], "kubectl apply keeps the value there"
    cached = await cached_at(operator, namespace, stored["metadata"]["resourceVersion"])
    assert set(cached["metadata"]) <= set(SECRET_METADATA_KEPT), cached
    assert cached["metadata"]["labels"] == {"team": "shop"}
    assert cached["metadata"]["uid"] == stored["metadata"]["uid"]
    needles = [first, base64.b64encode(first.encode()).decode(), LAST_APPLIED]
    assert holding(operator, needles) == []

    assert operator.manager is not None
    cache = operator.manager.cache
    secrets = ReferencedSecrets(kube, lambda ns, name: cache.get(SECRETS, name, ns, metadata_only=True))
    assert ((await secrets.get(namespace, "app-password")) or {})["data"]["password"] == needles[1]

    await apply(kubeconfig_path, tmp_path, namespace, second)
    changed = await kube.get(SECRETS, "app-password", namespace)
    await cached_at(operator, namespace, changed["metadata"]["resourceVersion"])
    read = await secrets.get(namespace, "app-password")
    assert (read or {})["data"]["password"] == base64.b64encode(second.encode()).decode()
    assert holding(operator, [second, base64.b64encode(second.encode()).decode(), LAST_APPLIED]) == []
