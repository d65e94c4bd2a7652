"""An operator upgrade rolls no Valkey pod (docs/upgrading.md, "Upgrading the operator").

The chart and the operator image of a pinned earlier revision (built from this repository's
history) are installed with helm; a TLS cluster and a persistent cluster become Active under that
operator; helm upgrade to this checkout's chart and image follows. The new operator must take the
clusters over as they are: every Valkey pod keeps its uid and its restart count, no roll begins
(no RolloutStarted Event, no status.rollout), and an in-place change the new operator makes
(podAnnotations) proves it reconciled each cluster before the pods are compared.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import own_bed
import pytest
from chart_support import install, operator_pods, package
from cluster_support import Catalog, create_cluster, image_config, owned_pods, put_tls_secret, settled
from persistence_support import persistent_config

from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import EVENTS
from valkey_operator.core.rest import Obj
from valkey_testbed import certs, images, operatorimage
from valkey_testbed.wait import NotYet, eventually

kube_control_plane, kubeconfig_path, kubelet = own_bed.FIXTURES  # the chart's CRDs are cluster-wide

pytestmark = [pytest.mark.integration]

PINNED_REVISION = "9522c121b5b51e91bdbc424c7ce751444b40d6f4"
"""The earlier revision upgraded from (2026-12-04, the last one before this test): kept pinned, so
the distance to the checkout under test grows with every change until someone moves it on."""
REPOSITORY = Path(__file__).resolve().parents[2]
CLUSTERS = {"tls": (2, 1), "durable": (2, 1)}
"""Name -> (shards, replicas)."""


def pinned_checkout(target: Path) -> Path:
    """A clone of this repository at PINNED_REVISION (its history must hold it: not a shallow clone)."""
    for argv in (
        ["git", "clone", "-q", "--no-checkout", str(REPOSITORY), str(target)],
        ["git", "-C", str(target), "checkout", "-q", PINNED_REVISION],
    ):
        done = subprocess.run(argv, capture_output=True, text=True)
        assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr}"
    return target


async def pods_by_uid(kube: Client, namespace: str) -> dict[str, tuple[str, int]]:
    """Every Valkey pod of the test's clusters: uid -> (name, restarts of its containers)."""
    found = {}
    for name in CLUSTERS:
        for pod in await owned_pods(kube, namespace, name):
            restarts = sum(
                s.get("restartCount", 0) for s in pod.get("status", {}).get("containerStatuses", [])
            )
            found[pod["metadata"]["uid"]] = (pod["metadata"]["name"], restarts)
    return found


async def rollouts_started(kube: Client, namespace: str) -> list[Obj]:
    return [event for event in await kube.list(EVENTS, namespace) if event.get("reason") == "RolloutStarted"]


@pytest.mark.timeout(1200)
async def test_an_operator_upgrade_replaces_no_valkey_pod(
    kube: Client,
    kubeconfig_path: Path,
    namespace: str,
    workloads: str,
    catalog: Catalog,
    tmp_path: Path,
    release: str,
    operator_image: operatorimage.BuiltImage,
) -> None:
    previous = await asyncio.to_thread(pinned_checkout, tmp_path / "previous")
    old_image = await asyncio.to_thread(
        operatorimage.build_and_load,
        print,
        checkout=previous,
        tag=f"upgrade-from-{PINNED_REVISION[:12]}",
        revision=PINNED_REVISION,
    )
    assert old_image.digest != operator_image.digest
    watched = f"watchNamespaces={{{workloads}}}"
    took = install(
        kubeconfig_path, namespace, watched, f"image.digest={old_image.digest}",
        chart=previous / "charts" / "valkey-operator",
    )  # fmt: skip
    print(f"helm install (chart and image at {PINNED_REVISION[:12]}) --wait: {took:.1f}s")

    # Under the old operator: a TLS cluster and a persistent one, both Active.
    pki_ca, pki_key = certs.issue_ca("upgrade-ca")
    cert, key = certs.issue_leaf(
        pki_ca, pki_key, "valkey", ip_addresses=("127.0.0.1",), server=True, client=True
    )
    await put_tls_secret(kube, workloads, (certs.pem(cert), certs.key_pem(key)), certs.pem(pki_ca))
    tls_config = await image_config(catalog, images.tls_image())
    durable_config = await persistent_config(catalog, {"mode": "rdb"}, name="durable")
    shards, replicas = CLUSTERS["tls"]
    await create_cluster(kube, workloads, "tls", tls_config, shards, replicas, tls={"secretRef": "tls"})
    shards, replicas = CLUSTERS["durable"]
    await create_cluster(kube, workloads, "durable", durable_config, shards, replicas)
    for name in CLUSTERS:
        await settled(kube, workloads, name, 360)
    before = await pods_by_uid(kube, workloads)
    assert len(before) == sum(shards * (1 + replicas) for shards, replicas in CLUSTERS.values())
    assert await rollouts_started(kube, workloads) == []

    # helm upgrade to this checkout's chart (packaged as users get it) and image.
    took = install(
        kubeconfig_path, namespace, watched, f"image.digest={operator_image.digest}",
        chart=package(tmp_path / "package"), command="upgrade",
    )  # fmt: skip
    print(f"helm upgrade to this checkout --wait: {took:.1f}s")
    live = await operator_pods(kube, namespace)
    assert live and all(
        pod["spec"]["containers"][0]["image"] == f"valkey-operator@{operator_image.digest}" for pod in live
    ), [pod["spec"]["containers"][0]["image"] for pod in live]

    # The new operator reconciles each cluster: an in-place change reaches every pod.
    for name in CLUSTERS:
        await kube.patch(VALKEY_CLUSTERS, name, {"spec": {"podAnnotations": {"upgraded": "yes"}}}, workloads)

    async def annotated() -> bool | NotYet:
        pods = [pod for name in CLUSTERS for pod in await owned_pods(kube, workloads, name)]
        missing = [
            p["metadata"]["name"]
            for p in pods
            if p["metadata"].get("annotations", {}).get("upgraded") != "yes"
        ]
        return True if not missing else NotYet(missing)

    await eventually(annotated, "the new operator to patch podAnnotations onto every Valkey pod", 120)
    for name in CLUSTERS:
        status = await settled(kube, workloads, name, 120)
        assert status.get("rollout") is None, (name, status.get("rollout"))
    assert await pods_by_uid(kube, workloads) == before
    assert await rollouts_started(kube, workloads) == []
