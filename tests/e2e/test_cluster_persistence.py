"""Persistence end to end (SPEC 1.6): durable nodes on their own claims, for rdb, aof everysec and
aof always.

A 3x1 cluster whose config asks for persistence runs every Valkey pod on a
PersistentVolumeClaim of its own, provisioned by the test bed's real
local-path-provisioner and bound by the real PV controller. Each test loses
nodes the way production does and checks that they come back as themselves
(the same Valkey node ids) with what the mode promises, key by key:
- a primary's pod deleted (graceful: it hands its slots over first) and a
  primary's server SIGKILLed (its pod ends Failed): a new pod starts on the
  same claim, and every acknowledged write (WAIT 1) is there;
- every test-bed node failed at once and recovered (every server restarts at
  a new IP from its claim): the operator re-introduces the nodes by id, and
  what survives is the mode's promise: rdb everything before the last
  completed save, aof everysec everything acknowledged more than a second
  before, aof always every acknowledged write, even one no replica saw.
Reads go through the valkey-py cluster client, as an application's would.

Lines starting with `[persistence]` report the measured times (run with -s).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

import pytest
from cluster_support import (
    Catalog,
    owned_pods,
    status_of,
)
from inprocess_operator import Operator
from load_support import Load, checker_for
from persistence_support import claim_of, claims_of, persistent_cluster, read_back, recorded_identities
from repair_support import (
    PREFILL,
    check_topology,
    checkers,
    kill_server,
    primary_of,
    repaired,
)

from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS
from valkey_operator.core.rest import Obj
from valkey_operator.testing.kubelet import KubeletControl
from valkey_operator.testing.wait import eventually
from valkey_operator.valkey.admin import AdminClient

# Fails every node: runs while no other test-bed module runs.
pytestmark = [pytest.mark.integration, pytest.mark.testbed_exclusive, pytest.mark.usefixtures("valkey_crds")]

MODES: Mapping[str, Obj] = {
    "rdb": {"mode": "rdb"},
    "aof-everysec": {"mode": "aof", "appendfsync": "everysec"},
    "aof-always": {"mode": "aof", "appendfsync": "always"},
}
EVERYSEC_MARGIN = 2.5
"""Seconds between the last acknowledged write and the failure for aof everysec: its promise is all
but about the last second."""


async def bgsave_everywhere(admin: AdminClient, status: Obj) -> None:
    """A completed save on every node: what rdb promises to keep."""
    for node in status["nodes"]:
        async with admin.connect(node["ip"]) as conn:
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


async def blackout(
    kube: Client,
    admin: AdminClient,
    namespace: str,
    name: str,
    status: Obj,
    mode: str,
    kubelet: KubeletControl,
) -> None:
    """Every test-bed node fails and recovers: every server restarts from its claim at a new IP."""
    identities = await recorded_identities(kube, namespace, name)
    before_ips = {node["nodeId"]: node["ip"] for node in status["nodes"]}
    promised: dict[bytes, bytes] = {}
    async with checker_for(status, admin, replicas=1) as durable:
        written = await durable.write(PREFILL)
        assert written.acknowledged == PREFILL, written
        if mode == "rdb":
            await bgsave_everywhere(admin, status)
            promised.update(durable.acknowledged)
            await durable.write(500)  # after the save: rdb promises nothing about these
        elif mode == "aof-everysec":
            promised.update(durable.acknowledged)
            await asyncio.sleep(EVERYSEC_MARGIN)
        else:
            promised.update(durable.acknowledged)
    if mode == "aof-always":
        async with checker_for(status, admin, replicas=0, prefix="always") as unreplicated:
            written = await unreplicated.write(1000)  # acknowledged by the primary alone, then the failure
            promised.update(unreplicated.acknowledged)
    hosts = sorted(node["name"] for node in (await kubelet.status())["nodes"])
    started = time.monotonic()
    failed: list[str] = []
    try:
        for host in hosts:
            await kubelet.fail_node(host)
            failed.append(host)

        async def noticed() -> bool:
            return (await status_of(kube, namespace, name)).get("state") != "Active"

        await eventually(noticed, "the operator to see the cluster down", 60)
    finally:  # the session's test bed keeps its nodes, whatever happens here
        for host in failed:
            await kubelet.recover_node(host)
    recovered = time.monotonic() - started
    status = await repaired(kube, namespace, name, pods=6)
    took = time.monotonic() - started
    after = await recorded_identities(kube, namespace, name)
    assert after == identities, f"every node back with its id: {identities} -> {after}"
    moved = [node_id for node_id, ip in before_ips.items() if ip not in {n["ip"] for n in status["nodes"]}]
    assert moved, "the servers restarted at new IPs"
    await check_topology(admin, kube, namespace, name, status, [])
    missing = await read_back(status, admin.credentials.password, promised)
    assert not missing, f"{len(missing)} of {len(promised)} promised keys lost, e.g. {missing[:5]}"
    print(
        f"[persistence] {name} ({mode}): every node failed; recovered at {recovered:.1f}s, every slot "
        f"served by the same {len(after)} node ids at new IPs at {took:.1f}s; {len(promised)} promised "
        f"keys read back through valkey-py"
    )


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", sorted(MODES))
async def test_durable_nodes_come_back_as_themselves_with_what_their_mode_promises(
    operator: Operator, kube: Client, catalog: Catalog, namespace: str, kubelet: KubeletControl, mode: str
) -> None:
    name = f"durable-{mode}"
    status, admin = await persistent_cluster(kube, catalog, namespace, name, MODES[mode])
    claims = await claims_of(kube, namespace, name)
    pods = await owned_pods(kube, namespace, name)
    assert len(claims) == 6 and {claim_of(pod) for pod in pods} == set(claims), (claims, pods)
    assert all(claim["status"]["phase"] == "Bound" for claim in claims.values()), claims
    status = await lose_and_return(kube, admin, namespace, name, status, "delete", kubelet)
    status = await lose_and_return(kube, admin, namespace, name, status, "kill", kubelet)
    await blackout(kube, admin, namespace, name, status, mode, kubelet)
