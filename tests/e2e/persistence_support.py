"""What the persistence end-to-end tests share: persistent configs and clusters, their data claims
and the node id each claim records, and reading keys back through the valkey-py cluster client."""

from __future__ import annotations

import time
from collections.abc import Mapping

from cluster_support import (
    NODE_TIMEOUT_MS,
    Catalog,
    admin_client,
    create_cluster,
    require_image,
    settled,
    status_of,
    superuser_client,
)
from repair_support import live_pods

from controllers.shared.names import CLUSTER_LABEL, NODE_ID_ANNOTATION
from valkey_operator.api.resources import VALKEY_CONFIGS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import PERSISTENT_VOLUME_CLAIMS
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient
from valkey_testbed import images
from valkey_testbed.wait import NotYet, eventually

MODES: Mapping[str, Obj] = {
    "rdb": {"mode": "rdb"},
    "aof-everysec": {"mode": "aof", "appendfsync": "everysec"},
    "aof-always": {"mode": "aof", "appendfsync": "always"},
}
SIZE = "64Mi"
FORMED = 240.0


async def persistent_config(
    catalog: Catalog, persistence: Obj, *, name: str = "cfg", image: str | None = None
) -> str:
    """A ValkeyConfig asking for persistence (size SIZE unless given) on `image` (a ValkeyImage of
    this catalog), or on a new ValkeyImage of the newest Valkey."""
    if image is None:
        reference = images.newest_image()
        require_image(reference)
        image = await catalog.image(f"img-{name}", images.valkey_version(reference))
    spec = {
        "imageRef": image,
        "valkey": {"cluster-node-timeout": NODE_TIMEOUT_MS},
        "persistence": {"size": SIZE, **persistence},
    }
    await catalog.create(VALKEY_CONFIGS, {"metadata": {"name": catalog(name)}, "spec": spec})
    return catalog(name)


async def persistent_cluster(
    kube: Client,
    catalog: Catalog,
    namespace: str,
    name: str,
    persistence: Obj,
    *,
    config: str | None = None,
    shards: int = 3,
    replicas: int = 1,
) -> tuple[Obj, AdminClient]:
    """A cluster Active on a persistent config (`config`, else a new one asking for `persistence`)."""
    if config is None:
        config = await persistent_config(catalog, persistence, name=f"cfg-{name}")
    started = time.monotonic()
    await create_cluster(kube, namespace, name, config, shards=shards, replicas=replicas)
    status = await settled(kube, namespace, name, FORMED)
    print(
        f"[persistence] {name}: {shards}x{replicas} with {persistence} Active after "
        f"{time.monotonic() - started:.1f}s"
    )
    return status, await admin_client(kube, namespace, name)


async def claims_of(kube: Client, namespace: str, name: str) -> dict[str, Obj]:
    """The cluster's data claims (found by label, as the operator finds them: also without an owner)."""
    found = await kube.list(PERSISTENT_VOLUME_CLAIMS, namespace, label_selector=f"{CLUSTER_LABEL}={name}")
    return {claim["metadata"]["name"]: claim for claim in found}


def claim_of(pod: Obj) -> str:
    (claim,) = [
        v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"] if v["name"] == "data"
    ]
    return str(claim)


def recorded_id(claim: Obj) -> str | None:
    return (claim["metadata"].get("annotations") or {}).get(NODE_ID_ANNOTATION)


async def ids_on_claims(kube: Client, namespace: str, name: str) -> dict[str, str]:
    """claim -> the node id its live pod's server reports (status), once the claims record it too."""
    status = await status_of(kube, namespace, name)
    ids = {node["pod"]: node.get("nodeId") for node in status.get("nodes") or []}
    pods = await live_pods(kube, namespace, name)
    claims = await claims_of(kube, namespace, name)
    on_claims = {claim_of(pod): ids.get(pod["metadata"]["name"]) for pod in pods}
    for claim, node_id in on_claims.items():
        recorded = recorded_id(claims[claim]) if claim in claims else None
        assert node_id and recorded == node_id, (claim, node_id, recorded)
    return {claim: str(node_id) for claim, node_id in on_claims.items()}


async def recorded_identities(kube: Client, namespace: str, name: str, pods: int = 6) -> dict[str, str]:
    async def recorded() -> dict[str, str] | None:
        try:
            found = await ids_on_claims(kube, namespace, name)
        except AssertionError:
            return None
        return found if len(found) == pods else None

    return await eventually(recorded, f"{name}: each claim records its server's node id", 60)


async def claims_follow_pods(
    kube: Client, namespace: str, name: str, pods: int, timeout: float = 120.0
) -> tuple[dict[str, Obj], list[Obj]]:
    """Wait until the cluster has exactly one claim per live pod (`pods` of them): every other claim,
    Terminating ones included, is gone. Returns (claims, live pods)."""

    async def matched() -> tuple[dict[str, Obj], list[Obj]] | NotYet:
        running = await live_pods(kube, namespace, name)
        claims = await claims_of(kube, namespace, name)
        used = {claim_of(pod) for pod in running}
        deleting = sorted(c for c, claim in claims.items() if claim["metadata"].get("deletionTimestamp"))
        if len(running) == pods and set(claims) == used and not deleting:
            return claims, running
        return NotYet(
            {
                "live pods": len(running),
                "claims without a live pod": sorted(set(claims) - used),
                "pods without a claim": sorted(used - set(claims)),
                "claims deleting": deleting,
            }
        )

    return await eventually(matched, f"{name}: one claim per live pod, {pods} of them", timeout)


async def bgsave_everywhere(admin: AdminClient, status: Obj) -> None:
    """A completed save on every node: what rdb promises to keep."""
    for node in status["nodes"]:
        async with superuser_client(admin.ca_pem).connect(node["ip"]) as conn:  # BGSAVE: not the operator's
            before = int((await conn.info("persistence"))["rdb_last_save_time"])
            await conn.command("BGSAVE")

        async def saved(ip: str = node["ip"], before: int = before) -> bool:
            async with admin.connect(ip) as conn:
                info = await conn.info("persistence")
            return (
                info["rdb_bgsave_in_progress"] == "0"
                and info["rdb_last_bgsave_status"] == "ok"
                and int(info["rdb_last_save_time"]) >= before
            )

        await eventually(saved, f"BGSAVE on {node['pod']}", 30)
