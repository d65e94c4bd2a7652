"""The official operator (valkey-io/valkey-operator) runs unchanged on our test bed.

An optional peer (docs/testing.md, "Optional tools"): skipped, saying which variable is unset,
unless VALKEY_PEER_OPERATOR (its manager binary) and VALKEY_PEER_CRDS (its CRD directory) are set.
Its binary runs out of cluster against the test bed; what the test bed needs goes through its CR.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from valkey.asyncio.cluster import ValkeyCluster

from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS
from valkey_testbed import images, peer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]


@pytest.fixture(scope="module")
def found() -> peer.Peer:
    located = peer.find_peer()
    if isinstance(located, peer.Absent):
        pytest.skip(located.reason)
    if images.resolve_image(peer.DEFAULT_IMAGE) is None:
        pytest.skip(f"{peer.DEFAULT_IMAGE} (the peer's default image) is not installed")
    return located


@pytest_asyncio.fixture
async def running(
    found: peer.Peer, kube: Client, kubeconfig_path: Path, namespace: str, tmp_path: Path
) -> AsyncIterator[peer.PeerProcess]:
    await peer.install_peer_crds(kube, found)
    process = peer.start_peer(found, kubeconfig_path, tmp_path / "peer.log", watch_namespaces=[namespace])
    try:
        yield process
    finally:
        usage = await process.stop()
        print(f"peer operator: {usage}; log {process.log_file}")


async def test_the_peer_bootstraps_a_3x1_cluster_that_serves_keys(
    running: peer.PeerProcess, kube: Client, namespace: str
) -> None:
    started = time.monotonic()
    await kube.create(peer.VALKEY_CLUSTERS, peer.cluster_manifest("peer", namespace, shards=3, replicas=1))
    try:
        serving = await peer.wait_serving(kube, namespace, "peer", shards=3, replicas=1, timeout=360)
    except AssertionError:
        print(running.log_file.read_text()[-4000:])
        raise
    elapsed = time.monotonic() - started
    print(f"peer 3x1: serving every slot {elapsed:.1f}s after create; primaries {serving.primaries}")
    assert len(serving.primaries) == 3 and len(serving.replicas) == 3
    await peer.wait_reported_ready(kube, namespace, "peer", shards=3, timeout=120)
    print(f"peer 3x1: reported Ready {time.monotonic() - started:.1f}s after create")
    assert running.alive(), "the peer is still running"

    pods = await kube.list(PODS, namespace, label_selector=f"{peer.CLUSTER_LABEL}=peer")
    for pod in pods:
        (server,) = [s for s in pod["status"]["containerStatuses"] if s["name"] == "server"]
        assert server["ready"] and server["restartCount"] == 0, "its localhost exec probes pass, no restarts"
        ip = pod["status"]["podIP"]
        assert await peer.config_get(ip, "bind") == ip, "bound to its pod IP only"
        assert await peer.config_get(ip, "cluster-node-timeout") == str(peer.NODE_TIMEOUT_MS)

    client = ValkeyCluster(host=serving.primaries[0], port=peer.PORT)
    try:
        keys = {f"peer-key-{i}": f"value-{i}" for i in range(300)}
        await client.mset_nonatomic(keys)
        values = await client.mget_nonatomic(list(keys))
        assert [v.decode() for v in values] == list(keys.values())
        assert {node.host for node in client.get_nodes()} <= {*serving.primaries, *serving.replicas}
    finally:
        await client.aclose()
