"""Persistence end to end (SPEC 1.6): a durable node lost without being planned comes back as itself.

A 3x1 cluster whose config asks for persistence (rdb, aof everysec, aof
always) runs every Valkey pod on a PersistentVolumeClaim of its own,
provisioned by the test bed's real local-path-provisioner and bound by the
real PV controller. A primary's pod is deleted (graceful: it hands its slots
over first), then a primary's server is SIGKILLed (its pod ends Failed): each
time a new pod starts on the same claim as the same Valkey node (same id),
and every acknowledged write (WAIT 1) under the load is there. The whole
cluster lost at once is test_cluster_persistence_blackout.py.

Lines starting with `[persistence]` report the measured times (run with -s).
"""

from __future__ import annotations

import time

import pytest
from chart_operator import ChartOperator
from cluster_support import Catalog, owned_pods
from load_support import Load
from persistence_support import MODES, claim_of, claims_of, persistent_cluster, recorded_identities
from repair_support import PREFILL, check_topology, checkers, kill_server, primary_of, repaired

from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient
from valkey_testbed.kubelet import KubeletControl

# Loses only its own pods: runs beside the other modules.
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]


async def full_syncs(admin: AdminClient, status: Obj) -> dict[str, int]:
    found = {}
    for node in status["nodes"]:
        async with admin.connect(node["ip"]) as conn:
            found[node["pod"]] = int((await conn.info("stats"))["sync_full"])
    return found


async def lose_and_return(
    kube: Client,
    admin: AdminClient,
    namespace: str,
    name: str,
    status: Obj,
    lose: str,
    kubelet: KubeletControl,
) -> Obj:
    """Lose shard 0's primary (`delete`: its pod; `kill`: its server) under write load; a new pod
    comes back on its claim as the same node, and every acknowledged write is there."""
    identities = await recorded_identities(kube, namespace, name)
    primary = primary_of(status, 0)
    pod = await kube.get(PODS, primary["pod"], namespace)
    claim = claim_of(pod)
    syncs_before = await full_syncs(admin, status)
    async with checkers(status, admin) as (checker, probe):
        async with Load(checker, probe) as load:
            started = time.monotonic()
            if lose == "delete":
                await kube.delete(PODS, primary["pod"], namespace)
            else:
                await kill_server(kubelet, namespace, primary["pod"], primary["ip"])
            status = await repaired(kube, namespace, name, pods=6, gone=[primary["pod"]])
            took = time.monotonic() - started
            report = await load.finish()
        verified = await checker.verify()
    assert verified.ok, verified
    assert verified.checked == PREFILL + report.durable.acknowledged, verified
    after = await recorded_identities(kube, namespace, name)
    assert after == identities, f"every claim keeps its node id: {identities} -> {after}"
    back = [node for node in status["nodes"] if node["nodeId"] == primary["nodeId"]]
    assert len(back) == 1 and back[0]["pod"] != primary["pod"], status["nodes"]
    assert claim_of(await kube.get(PODS, back[0]["pod"], namespace)) == claim
    await check_topology(admin, kube, namespace, name, status, [])
    syncs_after = await full_syncs(admin, status)
    print(
        f"[persistence] {name}: primary {lose}: back as {back[0]['pod']} on claim {claim} (same node id), "
        f"Active after {took:.1f}s; acknowledged {report.durable.acknowledged} during, all read back; "
        f"full syncs served per pod before {syncs_before} after {syncs_after}"
    )
    return status


@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", sorted(MODES))
async def test_a_lost_durable_node_comes_back_on_its_claim_as_itself(
    operator: ChartOperator,
    kube: Client,
    catalog: Catalog,
    namespace: str,
    kubelet: KubeletControl,
    mode: str,
) -> None:
    name = f"durable-{mode}"
    status, admin = await persistent_cluster(kube, catalog, namespace, name, MODES[mode])
    claims = await claims_of(kube, namespace, name)
    pods = await owned_pods(kube, namespace, name)
    assert len(claims) == 6 and {claim_of(pod) for pod in pods} == set(claims), (claims, pods)
    assert all(claim["status"]["phase"] == "Bound" for claim in claims.values()), claims
    status = await lose_and_return(kube, admin, namespace, name, status, "delete", kubelet)
    await lose_and_return(kube, admin, namespace, name, status, "kill", kubelet)
