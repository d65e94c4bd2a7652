"""The Helm chart installed as users install it: helm, the chart's Deployment run by the test bed's
kubelet from the operator image, under the chart's ServiceAccount and least-privilege RBAC.

One lifecycle test (install a previous chart, a cluster, leader takeover, upgrade, uninstall)
and one RBAC test per mode. The CRDs are cluster-wide, so this module's tests run one at a time.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import own_bed
import pytest
from chart_support import (
    RELEASE,
    adopt_crds,
    can_i,
    can_i_list,
    helm,
    install,
    kubectl,
    operator_pods,
    package,
    previous_chart,
)
from cluster_support import Catalog, formed_cluster, owned_pods, settled
from rbac_support import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, ROLE_BINDINGS, ROLES, SERVICE_ACCOUNTS

from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.leaderelection import longest_handover
from valkey_operator.core.resource import (
    CONFIG_MAPS,
    CUSTOM_RESOURCE_DEFINITIONS,
    DEPLOYMENTS,
    LEASES,
    PODS,
    SERVICES,
)
from valkey_operator.core.rest import Obj
from valkey_testbed import operatorimage
from valkey_testbed.crds import product_crds
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.wait import NotYet, eventually

kube_control_plane, kubeconfig_path, kubelet = own_bed.FIXTURES  # a test bed of this module's own

# Replaces a CRD and installs the chart's cluster-scoped objects: runs on a test bed of its own.
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

LEASE = "valkey-operator-leader"
LEASE_DURATION, RETRY_PERIOD = 15.0, 2.0  # the operator's leader-election timings
GOLDEN = Path(__file__).parent / "golden"


async def running_pods(kube: Client, namespace: str, count: int) -> list[Obj]:
    async def ready() -> list[Obj] | NotYet:
        pods = await operator_pods(kube, namespace)
        ok = [p for p in pods if p.get("status", {}).get("phase") == "Running"]
        return ok if len(ok) == count == len(pods) else NotYet([p["metadata"]["name"] for p in pods])

    return await eventually(ready, f"{count} operator pods Running", 120)


def became_leader(log: Path) -> list[tuple[str, str]]:
    """(timestamp, identity) of every 'became leader' line in a container log (JSON lines)."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if '"became leader"' in line:
            entry = json.loads(line)
            found.append((entry["timestamp"], entry["identity"]))
    return found


async def container_logs(kubelet: KubeletControl, namespace: str, pods: set[str]) -> list[Path]:
    logs = []
    for name in sorted(pods):
        seen = await kubelet.pod(namespace, name)
        logs += [Path(container["log"]) for container in (seen or {}).get("containers", [])]
    return logs


def refusals(logs: list[Path]) -> list[str]:
    """Log lines where the API server refused the operator a request (its RBAC too tight)."""
    lines = (line for log in logs for line in log.read_text(errors="replace").splitlines())
    return [line for line in lines if "forbidden" in line.lower()]


def proc_status(pid: int) -> dict[str, list[str]]:
    status = Path(f"/proc/{pid}/status").read_text()
    return {key: value.split() for key, value in (line.split(":", 1) for line in status.splitlines())}


async def runs_restricted(kubelet: KubeletControl, namespace: str, pod: str) -> None:
    """The operator container's main process runs as uid/gid 65532, without privileges, on a
    read-only root filesystem: read from /proc and tried with a write."""
    seen = await kubelet.pod(namespace, pod)
    assert seen is not None
    (container,) = seen["containers"]
    fields = proc_status(container["pid"])
    assert fields["Uid"] == ["65532"] * 4 and fields["Gid"] == ["65532"] * 4, fields["Uid"]
    assert fields["NoNewPrivs"] == ["1"] and int(fields["CapEff"][0], 16) == 0
    written = await kubelet.exec(namespace, pod, container["name"], ["sh", "-c", "echo x > /probe"])
    assert written.exit_code != 0 and b"Read-only file system" in written.output, written


async def lease_holder(kube: Client, namespace: str) -> str:
    lease = await kube.get(LEASES, LEASE, namespace)
    holder: str = lease["spec"].get("holderIdentity") or ""
    return holder


@pytest.mark.timeout(900)
async def test_chart_lifecycle_install_takeover_upgrade_uninstall(
    kube: Client,
    kubeconfig_path: Path,
    kubelet: KubeletControl,
    namespace: str,
    workloads: str,
    catalog: Catalog,
    tmp_path: Path,
    release: str,
    operator_image: operatorimage.BuiltImage,
) -> None:
    # A previous chart whose ValkeyCluster CRD lacks spec.podAnnotations (added since).
    previous = previous_chart(tmp_path / "previous", "podAnnotations")
    await adopt_crds(kube, namespace)
    # By digest: the tag is shared by every checkout's image on this machine (another checkout's test
    # run may load its own under it); the default tag's rendering is the render tests' to check.
    pinned = f"image.digest={operator_image.digest}"
    took = install(kubeconfig_path, namespace, f"watchNamespaces={{{workloads}}}", pinned, chart=previous)
    print(f"helm install (previous chart) --wait: {took:.1f}s")
    crd = await kube.get(CUSTOM_RESOURCE_DEFINITIONS, "valkeyclusters.valkey.gomomento.com")
    assert "podAnnotations" not in json.dumps(crd["spec"]["versions"][0]["schema"])

    # Both replicas run from the image built from the Containerfile, under the chart's
    # ServiceAccount, as the image's uid on a read-only root: what the processes show, not the spec.
    pods = await running_pods(kube, namespace, 2)
    for pod in pods:
        assert pod["spec"]["serviceAccountName"] == RELEASE + "-valkey-operator"
        assert pod["status"]["containerStatuses"][0]["imageID"] == f"valkey-operator@{operator_image.digest}"
        await runs_restricted(kubelet, namespace, pod["metadata"]["name"])
    names = {pod["metadata"]["name"] for pod in pods}
    holder = await eventually(lambda: lease_holder(kube, namespace), "a leader", 60)
    leader = holder.rsplit("_", 1)[0]
    assert leader in names, (holder, names)

    # The leader reconciles: a ValkeyCluster in the watched namespace becomes Active.
    status, _ = await formed_cluster(kube, catalog, workloads, "chart", shards=3, replicas=0)
    valkey_uids = {p["metadata"]["uid"] for p in await owned_pods(kube, workloads, "chart")}
    assert status["state"] == "Active" and len(valkey_uids) == 3

    # Kill the leader's process: the other replica (or the restarted one) leads within the lease.
    seen = await kubelet.pod(namespace, leader)
    assert seen is not None
    (operator_container,) = seen["containers"]
    killed_at = time.time()
    started = time.monotonic()
    os.kill(operator_container["pid"], signal.SIGKILL)

    async def new_holder() -> str | NotYet:
        current = await lease_holder(kube, namespace)
        return current if current and current != holder else NotYet(current)

    taken_by = await eventually(new_holder, "another process to lead", LEASE_DURATION + RETRY_PERIOD + 30)
    takeover = time.monotonic() - started
    print(f"leader {holder} killed; {taken_by} leads after {takeover:.1f}s")
    # Killed no sooner than its last renewal: the standby leads within the elector's bound of the kill.
    assert takeover <= longest_handover(LEASE_DURATION, RETRY_PERIOD) + 1
    # Never two at once: every 'became leader' after the first comes after the kill.
    logs = await container_logs(kubelet, namespace, names)
    leaderships = sorted(entry for log in logs for entry in became_leader(log))
    assert leaderships[0][1] == holder and len(leaderships) == 2, leaderships
    assert leaderships[1][0] >= time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(killed_at)), leaderships
    lease = await kube.get(LEASES, LEASE, namespace)
    assert lease["spec"]["leaseTransitions"] >= 1

    # The new leader reconciles; the old CRD refuses the newer field (kubectl validates strictly).
    refused = kubectl(
        kubeconfig_path, "-n", workloads, "patch", "valkeycluster", "chart", "--type=merge",
        "-p", '{"spec":{"podAnnotations":{"team":"cache"}}}', check=False,
    )  # fmt: skip
    assert 'unknown field "spec.podAnnotations"' in refused, refused

    assert refusals(logs) == []

    # helm upgrade to this chart, packaged as users get it, with a changed value and a rebuilt image
    # pinned by digest: the CRD moves to this chart's version (the .tgz carries it), the operator
    # pods roll onto the new image, every Valkey pod stays.
    rebuilt = await asyncio.to_thread(
        operatorimage.build_and_load, print, tag="e2e-rebuilt", revision=f"rebuilt-{operator_image.digest}"
    )
    assert rebuilt.digest != operator_image.digest
    archive = package(tmp_path / "package")
    took = install(
        kubeconfig_path, namespace, f"watchNamespaces={{{workloads}}}", "logLevel=debug",
        f"image.digest={rebuilt.digest}", chart=archive, command="upgrade",
    )  # fmt: skip
    print(f"helm upgrade {archive.name} --wait: {took:.1f}s")
    crd = await kube.get(CUSTOM_RESOURCE_DEFINITIONS, "valkeyclusters.valkey.gomomento.com")
    assert "podAnnotations" in json.dumps(crd["spec"]["versions"][0]["schema"])
    upgraded = await running_pods(kube, namespace, 2)
    assert not names & {pod["metadata"]["name"] for pod in upgraded}
    for pod in upgraded:
        assert pod["spec"]["containers"][0]["image"] == f"valkey-operator@{rebuilt.digest}"
        assert pod["status"]["containerStatuses"][0]["imageID"] == f"valkey-operator@{rebuilt.digest}"
        assert "--log-level=debug" in pod["spec"]["containers"][0]["args"]
        await runs_restricted(kubelet, namespace, pod["metadata"]["name"])
    kubectl(
        kubeconfig_path, "-n", workloads, "patch", "valkeycluster", "chart", "--type=merge",
        "-p", '{"spec":{"podAnnotations":{"team":"cache"}}}',
    )  # fmt: skip

    async def annotated() -> bool:
        valkeys = await owned_pods(kube, workloads, "chart")
        return all(p["metadata"].get("annotations", {}).get("team") == "cache" for p in valkeys)

    await eventually(annotated, "the new leader to patch podAnnotations onto the Valkey pods", 90)
    await settled(kube, workloads, "chart", 60)
    assert {p["metadata"]["uid"] for p in await owned_pods(kube, workloads, "chart")} == valkey_uids
    assert refusals(await container_logs(kubelet, namespace, {p["metadata"]["name"] for p in upgraded})) == []

    # helm test: the chart's test pod, from the operator image, finds both operator pods answering
    # /readyz at their pod IPs and every CRD Established; its pod and RBAC are gone once it passed.
    tested = helm(kubeconfig_path, "test", RELEASE, "-n", namespace, "--timeout", "2m")
    phases = [line.split()[-1] for line in tested.splitlines() if line.startswith("Phase:")]
    assert phases and set(phases) == {"Succeeded"}, tested

    async def no_test_pod() -> bool:
        return await kube.get_or_none(PODS, f"{RELEASE}-valkey-operator-test", namespace) is None

    await eventually(no_test_pod, "helm to delete the passed test pod", 30)

    # helm uninstall: no operator object is left, every CRD stays, and so does the cluster.
    helm(kubeconfig_path, "uninstall", RELEASE, "-n", namespace, "--wait")
    assert await kube.list(DEPLOYMENTS, namespace) == []
    assert [a["metadata"]["name"] for a in await kube.list(SERVICE_ACCOUNTS, namespace)] == ["default"]
    assert await kube.list(SERVICES, namespace) == []
    assert await kube.list(ROLES, namespace) == [] and await kube.list(ROLE_BINDINGS, workloads) == []
    assert "valkey-operator-config" not in {
        c["metadata"]["name"] for c in await kube.list(CONFIG_MAPS, namespace)
    }
    leftover = [
        r["metadata"]["name"]
        for kind in (CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS)
        for r in await kube.list(kind)
        if r["metadata"]["name"].startswith(f"{RELEASE}-valkey-operator")
    ]
    assert leftover == []
    for path in product_crds():
        name = path.name.removesuffix(".yaml") + ".valkey.gomomento.com"
        assert await kube.get_or_none(CUSTOM_RESOURCE_DEFINITIONS, name) is not None, name
    assert await kube.get_or_none(VALKEY_CLUSTERS, "chart", workloads) is not None


def golden(name: str, rules: set[str], release_namespace: str, watched: str) -> None:
    """Compare with tests/e2e/golden/<name>.txt (namespaces written as placeholders)."""
    lines = sorted(
        rule.replace(release_namespace, "<release-namespace>").replace(watched, "<watched>") for rule in rules
    )
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    assert lines == path.read_text().splitlines(), f"RBAC differs from {path} (UPDATE_GOLDEN=1 rewrites it)"


@pytest.mark.timeout(300)
async def test_rbac_is_exactly_enough_in_both_modes(
    kube: Client, kubeconfig_path: Path, namespace: str, workloads: str, release: str
) -> None:
    account = f"system:serviceaccount:{namespace}:{RELEASE}-valkey-operator"
    unwatched = "default"
    for mode, values in (("cluster-wide", ()), ("namespaced", (f"watchNamespaces={{{workloads}}}",))):
        await adopt_crds(kube, namespace)
        install(kubeconfig_path, namespace, "replicaCount=0", *values)
        try:
            for where, rules in (
                ("release", can_i_list(kubeconfig_path, account, namespace)),
                ("watched", can_i_list(kubeconfig_path, account, workloads)),
            ):
                golden(f"rbac-{mode}-{where}", rules, namespace, workloads)
            for verb in ("create", "get"):  # exec over SPDY posts, over WebSockets gets
                assert not can_i(
                    kubeconfig_path, account, verb, "pods", "--subresource=exec", "-n", workloads
                )
                assert not can_i(kubeconfig_path, account, verb, "pods", "--subresource=exec", "-A")
            assert not can_i(kubeconfig_path, account, "delete", "customresourcedefinitions")
            assert not can_i(kubeconfig_path, account, "update", "customresourcedefinitions")
            assert not can_i(kubeconfig_path, account, "list", "issuers.cert-manager.io", "-n", workloads)
            assert not can_i(kubeconfig_path, account, "delete", "secrets", "-n", workloads)
            assert not can_i(kubeconfig_path, account, "delete", "valkeyclusters", "-n", workloads)
            assert not can_i(kubeconfig_path, account, "get", "leases/another", "-n", namespace)
            assert can_i(kubeconfig_path, account, "list", "secrets", "-n", workloads)
            if mode == "namespaced":
                assert not can_i(kubeconfig_path, account, "get", "secrets", "-n", unwatched)
                assert not can_i(kubeconfig_path, account, "list", "secrets", "--all-namespaces")
                assert not can_i(kubeconfig_path, account, "list", "pods", "--all-namespaces")
                assert not can_i(kubeconfig_path, account, "create", "pods", "-n", namespace)
        finally:
            helm(kubeconfig_path, "uninstall", RELEASE, "-n", namespace, "--wait")
