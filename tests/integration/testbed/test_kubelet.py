"""The process kubelet: pods scheduled by the real scheduler run as real processes.

Every test runs its pods in a fresh namespace; at teardown the pods are
deleted and the test checks that the kubelet forgot them and that none of
their processes is left.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import own_bed
import pytest
from kubelet_support import (
    BUSYBOX,
    POD_IP_ENV,
    Pods,
    alive,
    busybox,
    clear_namespace,
    condition,
    container_status,
    pod_body,
    proc,
    process,
    read_text,
)
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from rbac_support import ROLE_BINDINGS, ROLES, SERVICE_ACCOUNTS, everything_allowed

from valkey_operator.core.client import Client
from valkey_operator.core.resource import CONFIG_MAPS, DEPLOYMENTS, NAMESPACES, PODS, Resource
from valkey_operator.core.rest import RestClient
from valkey_testbed import images
from valkey_testbed.build import binaries
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.kubelet.nodes import NODES
from valkey_testbed.kubelet.pods import STRATEGIC_MERGE_PATCH
from valkey_testbed.sessionbed import BACKOFF_BASE, SYNC_DELAY
from valkey_testbed.wait import NotYet, eventually

kube_control_plane, kubeconfig_path, kubelet = own_bed.FIXTURES  # a test bed of this module's own

# Some tests fail a node: the module runs on a test bed of its own (the CLI test starts yet another).
pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

Obj = dict[str, Any]
OPERATOR = "valkey-operator:dev"
POD_NETWORK = ipaddress.ip_network("127.1.0.0/16")


@pytest.fixture(scope="module", autouse=True)
def catalog_installed() -> None:
    """The images these tests run must be installed (`python -m valkey_testbed build`)."""
    missing = [ref for ref in (BUSYBOX, OPERATOR) if images.resolve_image(ref) is None]
    assert not missing, f"images not installed: {missing}; run `python -m valkey_testbed build`"


async def test_nodes_are_registered_with_zones_and_leases(kube: Client) -> None:
    nodes = {n["metadata"]["name"]: n for n in await kube.list(NODES)}
    assert {"node-1", "node-2", "node-3"} <= set(nodes)
    zones = {nodes[f"node-{i}"]["metadata"]["labels"]["topology.kubernetes.io/zone"] for i in (1, 2, 3)}
    assert zones == {"a", "b", "c"}
    for name in ("node-1", "node-2", "node-3"):
        node = nodes[name]
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == name
        assert int(node["status"]["allocatable"]["pods"]) >= 100
        address = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
        assert ipaddress.ip_address(address).is_loopback
        lease = await kube.get(
            Resource("coordination.k8s.io", "v1", "leases", "Lease"), name, "kube-node-lease"
        )
        assert lease["spec"]["holderIdentity"] == name


async def test_deployment_pods_run_and_become_ready(kube: Client, namespace: str, pods: Pods) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "sleepers", "namespace": namespace},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "sleepers"}},
            "template": {
                "metadata": {"labels": {"app": "sleepers"}},
                "spec": {
                    "terminationGracePeriodSeconds": 2,
                    "containers": [
                        {
                            "name": "main",
                            "image": BUSYBOX,
                            "command": ["sleep", "3600"],
                            "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 2},
                        }
                    ],
                },
            },
        },
    }
    await kube.create(DEPLOYMENTS, deployment)

    async def available() -> bool:
        status = (await kube.get(DEPLOYMENTS, "sleepers", namespace)).get("status", {})
        return status.get("availableReplicas") == 3

    await eventually(available, "3 available replicas", 90)
    nodes = {n["metadata"]["name"]: n for n in await kube.list(NODES)}
    running = await kube.list(PODS, namespace)
    assert len(running) == 3
    ips = set()
    for pod in running:
        status = pod["status"]
        assert status["phase"] == "Running"
        assert {condition(pod, c) for c in ("Initialized", "ContainersReady", "Ready", "PodScheduled")} == {
            "True"
        }
        assert ipaddress.ip_address(status["podIP"]) in POD_NETWORK
        assert status["podIPs"] == [{"ip": status["podIP"]}]
        node = nodes[pod["spec"]["nodeName"]]
        assert status["hostIP"] == next(
            a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"
        )
        main = container_status(pod)
        assert main["ready"] is True and main["restartCount"] == 0 and "running" in main["state"]
        ips.add(status["podIP"])
        pid = await pods.pid(pod["metadata"]["name"])
        assert proc(pid, "cmdline").split(b"\0")[-2:] == [b"3600", b""]
    assert len(ips) == 3, "pod IPs must be unique"


async def test_args_are_expanded_with_downward_api_env(pods: Pods, namespace: str) -> None:
    env = [
        *POD_IP_ENV,
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "GREETING", "value": "hello-$(NS)"},
    ]
    script = 'echo "ip=$1 node=$2 greeting=$3 escaped=$4 unknown=$5 host=$(hostname)"; exec sleep 3600'
    container = {
        "image": BUSYBOX,
        "command": ["sh", "-c", script, "sh"],
        "args": ["$(POD_IP)", "$(NODE)", "$(GREETING)", "$$(POD_IP)", "$(NOT_DEFINED)"],
        "env": env,
    }
    await pods.create(pod_body("expander", container))
    pod = await pods.ready("expander")
    log = await pods.wait_log("expander", "ip=")
    expected = (
        f"ip={pod['status']['podIP']} node={pod['spec']['nodeName']} greeting=hello-{namespace} "
        f"escaped=$(POD_IP) unknown=$(NOT_DEFINED) host=expander"
    )
    assert expected in log, log
    environ = proc(await pods.pid("expander"), "environ").split(b"\0")
    assert f"POD_IP={pod['status']['podIP']}".encode() in environ
    assert b"KUBERNETES_SERVICE_HOST=127.0.0.1" in environ


async def test_configmap_volume_change_reaches_the_process_after_the_sync_delay(
    kube: Client, pods: Pods, namespace: str
) -> None:
    await kube.create(
        CONFIG_MAPS, {"metadata": {"name": "settings", "namespace": namespace}, "data": {"value": "one"}}
    )
    script = (
        "last=; while true; do v=$(cat /etc/settings/value); "
        'if [ "$v" != "$last" ]; then echo "seen=$v"; last=$v; fi; sleep 0.2; done'
    )
    container = busybox(script, volumeMounts=[{"name": "settings", "mountPath": "/etc/settings"}])
    volumes = [{"name": "settings", "configMap": {"name": "settings"}}]
    await pods.create(pod_body("reader", container, volumes=volumes))
    await pods.ready("reader")
    await pods.wait_log("reader", "seen=one")

    changed = time.monotonic()
    await kube.patch(CONFIG_MAPS, "settings", {"data": {"value": "two"}}, namespace)
    early = await pods.log("reader")
    if time.monotonic() - changed < SYNC_DELAY / 2:
        assert "seen=two" not in early, "the volume changed before the sync delay"
    await pods.wait_log("reader", "seen=two", timeout=SYNC_DELAY + 30)
    # A generous lower bound: the kubelet's delay runs from when it saw the change, which on a loaded
    # machine may be well before the patch call returned here.
    assert time.monotonic() - changed >= SYNC_DELAY * 0.5


async def test_exec_readiness_probe_fails_then_recovers(
    pods: Pods, kubelet: KubeletControl, namespace: str
) -> None:
    # Each run of the probe leaves a line behind, so the test knows it ran (and failed: no file yet).
    check = "echo run >> /probe-state/runs; test -f /probe-state/ready"
    probe = {"exec": {"command": ["sh", "-c", check]}, "periodSeconds": 1, "failureThreshold": 1}
    mounts = [{"name": "state", "mountPath": "/probe-state"}]
    container = busybox("exec sleep 3600", readinessProbe=probe, volumeMounts=mounts)
    await pods.create(pod_body("probed", container, volumes=[{"name": "state", "emptyDir": {}}]))
    await pods.wait(
        "probed", lambda p: "running" in container_status(p).get("state", {}), what="probed running"
    )

    async def probed_twice() -> bool | NotYet:
        result = await kubelet.exec(namespace, "probed", "main", ["cat", "/probe-state/runs"])
        runs = result.output.decode().count("run") if result.exit_code == 0 else 0
        return runs >= 2 or NotYet(f"{runs} probe runs")

    await eventually(probed_twice, "two failed runs of the readiness probe", 30)
    pod = await pods.get("probed")
    assert condition(pod, "Ready") == "False" and container_status(pod)["ready"] is False

    result = await kubelet.exec(namespace, "probed", "main", ["touch", "/probe-state/ready"])
    assert result.exit_code == 0, result.output
    await pods.ready("probed", timeout=30)

    await kubelet.exec(namespace, "probed", "main", ["rm", "/probe-state/ready"])
    await pods.wait("probed", lambda p: condition(p, "Ready") == "False", 30, "probed not Ready")

    await kubelet.exec(namespace, "probed", "main", ["touch", "/probe-state/ready"])
    pod = await pods.ready("probed", timeout=30)
    assert container_status(pod)["restartCount"] == 0, "a readiness probe never restarts a container"
    # The probe ran in the container's own mount namespace: the file is not on the host.
    assert not read_text(Path("/probe-state/ready"))


async def test_a_ready_condition_another_writer_clears_is_set_back(
    kube: Client, pods: Pods, namespace: str
) -> None:
    """The node lifecycle controller marks pods not ready when heartbeats stop; a node that is back
    (or never was gone) must undo it, however the two writes interleave."""
    probe = {"exec": {"command": ["true"]}, "periodSeconds": 1}
    await pods.create(pod_body("marked", busybox("exec sleep 3600", readinessProbe=probe)))
    pod = await pods.ready("marked")
    for attempt in range(5):
        conditions = [
            {**c, "status": "False", "reason": "NodeNotReady"} if c["type"] == "Ready" else c
            for c in pod["status"]["conditions"]
        ]
        marked = await kube.patch_status(PODS, "marked", {"status": {"conditions": conditions}}, namespace)
        assert condition(marked, "Ready") == "False", marked["status"]
        pod = await pods.ready("marked", timeout=30)
        assert container_status(pod)["ready"] is True, (attempt, pod["status"])


async def test_crashing_container_restarts_with_backoff(pods: Pods) -> None:
    script = "date +%s.%N; exit 3"
    await pods.create(pod_body("crasher", busybox(script), terminationGracePeriodSeconds=1))
    seen_backoff: set[str] = set()

    async def restarted_enough() -> Obj | None:
        pod = await pods.get("crasher")
        main = container_status(pod)
        waiting = main.get("state", {}).get("waiting", {})
        if waiting.get("reason"):
            seen_backoff.add(waiting["reason"])
        return pod if main.get("restartCount", 0) >= 4 else None

    pod = await eventually(restarted_enough, "restartCount >= 4", 120)
    main = container_status(pod)
    assert "CrashLoopBackOff" in seen_backoff
    terminated = main["lastState"]["terminated"]
    assert terminated["exitCode"] == 3 and terminated["reason"] == "Error"
    assert pod["status"]["phase"] == "Running"  # restartPolicy Always: the pod keeps running
    starts = [float(line) for line in (await pods.log("crasher")).split()]
    assert len(starts) >= 5
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # Immediate first restart, then base, 2*base, 4*base: the waits grow.
    assert gaps[2] >= BACKOFF_BASE * 0.9 and gaps[3] >= 2 * BACKOFF_BASE * 0.9, gaps
    assert gaps[3] > gaps[1], gaps


async def test_failed_container_reports_its_log_tail_with_fallback_to_logs_on_error(pods: Pods) -> None:
    script = "echo starting; echo '*** FATAL CONFIG FILE ERROR (Version 8.1.8) ***'; exit 1"
    container = busybox(script, terminationMessagePolicy="FallbackToLogsOnError")
    await pods.create(pod_body("fatal", container, restartPolicy="Never"))

    async def failed() -> Obj | None:
        pod = await pods.get("fatal")
        return pod if pod.get("status", {}).get("phase") == "Failed" else None

    pod = await eventually(failed, "the pod to fail", 60)
    terminated = container_status(pod)["state"]["terminated"]
    assert terminated["exitCode"] == 1
    assert terminated["message"].splitlines() == [
        "starting",
        "*** FATAL CONFIG FILE ERROR (Version 8.1.8) ***",
    ]


async def test_kubectl_logs_reads_through_the_api_server_and_follows_until_the_container_stops(
    pods: Pods, kubeconfig_path: Path
) -> None:
    script = "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.5; done"
    await pods.create(pod_body("talker", busybox(script), restartPolicy="Never"))
    await pods.wait_log("talker", "line 2")

    def kubectl(*args: str) -> list[str]:
        command = [str(binaries().kubectl), "--kubeconfig", str(kubeconfig_path), "-n", pods.namespace]
        done = subprocess.run([*command, "logs", *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    assert (await asyncio.to_thread(kubectl, "talker"))[:2] == ["line 1", "line 2"]
    started = time.monotonic()
    followed = await asyncio.to_thread(kubectl, "talker", "--tail=1", "--follow")
    assert followed[-1] == "line 6" and len(followed) < 6, followed  # from the tail, to the end
    assert time.monotonic() - started < 30  # ended with the container, not at the timeout


async def test_deletion_sends_sigterm_and_honours_the_grace_period(
    kube: Client, pods: Pods, namespace: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)
    volume = [{"name": "out", "hostPath": {"path": str(out), "type": "Directory"}}]
    mount = [{"name": "out", "mountPath": "/out"}]
    graceful = busybox(
        "trap 'echo term > /out/graceful-term; sleep 3; echo done > /out/graceful-done; exit 0' TERM; "
        "echo up; while true; do sleep 0.2; done",
        volumeMounts=mount,
    )
    stubborn = busybox(
        "trap 'echo term > /out/stubborn-term' TERM; echo up; while true; do sleep 0.2; done",
        volumeMounts=mount,
    )
    await pods.create(pod_body("graceful", graceful, volumes=volume, terminationGracePeriodSeconds=30))
    await pods.create(pod_body("stubborn", stubborn, volumes=volume, terminationGracePeriodSeconds=3))
    for name in ("graceful", "stubborn"):
        await pods.ready(name)
        await pods.wait_log(name, "up")
    pids = {name: process(await pods.pid(name)) for name in ("graceful", "stubborn")}

    started = time.monotonic()
    await kube.delete(PODS, "graceful", namespace)
    await kube.delete(PODS, "stubborn", namespace)

    async def gone(name: str) -> float | None:
        pod = await kube.get_or_none(PODS, name, namespace)
        return time.monotonic() - started if pod is None else None

    graceful_after, stubborn_after = await asyncio.gather(
        eventually(lambda: gone("graceful"), "graceful pod removed", 60),
        eventually(lambda: gone("stubborn"), "stubborn pod removed", 60),
    )
    # graceful: its TERM trap ran to the end (3 s) and it exited well before its 30 s grace.
    assert (out / "graceful-term").read_text() == "term\n"
    assert (out / "graceful-done").read_text() == "done\n"
    assert 2.5 <= graceful_after < 25, graceful_after
    # stubborn: TERM was delivered and ignored; SIGKILL came when its 3 s grace ran out.
    assert (out / "stubborn-term").read_text() == "term\n"
    assert 2.5 <= stubborn_after < 15, stubborn_after
    assert not any(alive(pid) for pid in pids.values())


async def test_restricted_namespace_runs_a_compliant_pod_as_its_uid(
    kube: Client, kubelet: KubeletControl, pods: Pods, namespace: str
) -> None:
    restricted = f"{namespace}-r"
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    await kube.create(NAMESPACES, {"metadata": {"name": restricted, "labels": labels}})
    confined = Pods(kube, kubelet, restricted)
    try:
        container = busybox(
            "id; exec sleep 3600",
            securityContext={
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "runAsNonRoot": True,
            },
            volumeMounts=[{"name": "scratch", "mountPath": "/scratch"}],
        )
        security = {
            "runAsUser": 1000,
            "runAsGroup": 3000,
            "fsGroup": 2000,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        await confined.create(
            pod_body(
                "compliant",
                container,
                securityContext=security,
                volumes=[{"name": "scratch", "emptyDir": {}}],
            )
        )
        await confined.ready("compliant")
        status = proc(await confined.pid("compliant"), "status").decode()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        assert fields["Uid"].split() == ["1000"] * 4
        assert fields["Gid"].split() == ["3000"] * 4
        assert "2000" in fields["Groups"].split()
        assert fields["NoNewPrivs"].strip() == "1"
        log = await confined.wait_log("compliant", "uid=1000")
        assert "gid=3000" in log
    finally:
        await clear_namespace(kube, kubelet, restricted)
        await kube.delete(NAMESPACES, restricted)
    assert not any(alive(pid) for pid in confined.pids)

    # runAsNonRoot is enforced by the kubelet too: an explicit root user is refused.
    rooted = busybox("exec sleep 3600", securityContext={"runAsNonRoot": True, "runAsUser": 0})
    await pods.create(pod_body("rooted", rooted))
    message = await pods.waiting_message("rooted", "CreateContainerConfigError")
    assert "non-root" in message


async def test_node_failure_and_recovery(
    kube: Client, kubelet: KubeletControl, pods: Pods, namespace: str
) -> None:
    node = "node-3"
    script = "echo $(POD_IP) >> /data/history; exec sleep 3600"
    for name in ("survivor-a", "survivor-b"):
        container = busybox(script, env=POD_IP_ENV, volumeMounts=[{"name": "data", "mountPath": "/data"}])
        await pods.create(
            pod_body(
                name,
                container,
                nodeSelector={"kubernetes.io/hostname": node},
                volumes=[{"name": "data", "emptyDir": {}}],
            )
        )
    before = {name: await pods.ready(name) for name in ("survivor-a", "survivor-b")}
    pids = {name: process(await pods.pid(name)) for name in before}

    await kubelet.fail_node(node)
    try:
        assert not any(alive(pid) for pid in pids.values()), "the node's processes must die with it"
        for name, pod in before.items():  # the API still shows the pods as they were
            assert (await pods.get(name))["metadata"]["uid"] == pod["metadata"]["uid"]

        async def node_not_ready() -> bool:
            conditions = (await kube.get(NODES, node))["status"]["conditions"]
            return any(c["type"] == "Ready" and c["status"] != "True" for c in conditions)

        await eventually(node_not_ready, f"{node} NotReady", 60)
        for name in before:
            await pods.wait(name, lambda p: condition(p, "Ready") == "False", 30, f"{name} marked not ready")
    finally:
        await kubelet.recover_node(node)

    async def node_ready() -> bool:
        conditions = (await kube.get(NODES, node))["status"]["conditions"]
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    await eventually(node_ready, f"{node} Ready again", 60)
    for name, pod in before.items():
        after = await pods.wait(
            name,
            lambda p: condition(p, "Ready") == "True" and container_status(p).get("restartCount") == 1,
            60,
            f"{name} back",
        )
        assert after["metadata"]["uid"] == pod["metadata"]["uid"], "the same pod, not a replacement"
        assert after["spec"]["nodeName"] == node
        old_ip, new_ip = pod["status"]["podIP"], after["status"]["podIP"]
        assert new_ip != old_ip, "a recovered pod gets a new IP"
        history = await kubelet.exec(namespace, name, "main", ["cat", "/data/history"])
        assert history.output.decode().split() == [old_ip, new_ip], "emptyDir contents survive"
        assert process(await pods.pid(name)) != pids[name]


async def test_node_reboot_empties_memory_emptydirs_and_keeps_disk_ones(
    kubelet: KubeletControl, pods: Pods, namespace: str
) -> None:
    """fail_node + recover_node is a reboot: tmpfs (medium Memory) is gone, a disk emptyDir is not.

    The Valkey pods' restart safety rests on this (nodes.conf on a Memory emptyDir): the pod runs
    again even with restartPolicy Never, as on a real rebooted node, but without its identity.
    """
    node = "node-2"
    script = "echo $(POD_IP) >> /disk/history; echo $(POD_IP) >> /memory/history; exec sleep 3600"
    mounts = [{"name": "disk", "mountPath": "/disk"}, {"name": "memory", "mountPath": "/memory"}]
    container = busybox(script, env=POD_IP_ENV, volumeMounts=mounts)
    volumes = [
        {"name": "disk", "emptyDir": {}},
        {"name": "memory", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
    ]
    body = pod_body(
        "rebooted",
        container,
        restartPolicy="Never",
        nodeSelector={"kubernetes.io/hostname": node},
        volumes=volumes,
    )
    await pods.create(body)
    before = await pods.ready("rebooted")
    old_ip = before["status"]["podIP"]
    for path in ("/disk/history", "/memory/history"):
        written = await kubelet.exec(namespace, "rebooted", "main", ["cat", path])
        assert written.output.decode().split() == [old_ip], path

    await kubelet.fail_node(node)
    await kubelet.recover_node(node)

    after = await pods.wait(
        "rebooted",
        lambda p: condition(p, "Ready") == "True" and container_status(p).get("restartCount") == 1,
        60,
        "rebooted back",
    )
    assert after["metadata"]["uid"] == before["metadata"]["uid"], "the same pod runs again"
    new_ip = after["status"]["podIP"]
    assert new_ip != old_ip
    disk = await kubelet.exec(namespace, "rebooted", "main", ["cat", "/disk/history"])
    assert disk.output.decode().split() == [old_ip, new_ip], "a disk emptyDir survives the reboot"
    memory = await kubelet.exec(namespace, "rebooted", "main", ["cat", "/memory/history"])
    assert memory.output.decode().split() == [new_ip], "a Memory emptyDir comes back empty"


async def test_operator_image_lists_valkeyimages_only_with_rbac(
    kube: Client, pods: Pods, namespace: str, kube_control_plane: ControlPlane, valkey_crds: None
) -> None:
    account = "valkey-operator"
    await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": account, "namespace": namespace}})
    # Reading its ConfigMap (valkey-operator-config, in its own namespace) comes first; a refused read
    # stops the operator, so that one permission is granted up front.
    read_config = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}
    await kube.create(ROLES, {"metadata": {"name": account, "namespace": namespace}, "rules": [read_config]})
    await kube.create(
        ROLE_BINDINGS,
        {
            "metadata": {"name": account, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    )
    container = {
        "image": OPERATOR,
        "args": [
            "--metrics-bind-address=$(POD_IP):8080",
            "--health-probe-bind-address=$(POD_IP):8081",
            "--log-format=json",
        ],
        "env": POD_IP_ENV,
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081}, "periodSeconds": 2},
        "securityContext": {"runAsNonRoot": True},
    }
    await pods.create(pod_body("operator", container, serviceAccountName=account))
    await pods.wait(
        "operator", lambda p: "running" in container_status(p).get("state", {}), 60, "operator running"
    )
    user = f"system:serviceaccount:{namespace}:{account}"
    forbidden = f'User "{user}" cannot list resource "valkeyimages"'

    async def refused() -> bool:  # the log is JSON lines: quotes inside messages are escaped
        return forbidden in (await pods.log("operator")).replace('\\"', '"')

    try:
        await eventually(refused, "the operator's list of valkeyimages to be forbidden", 90)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; operator log:\n{(await pods.log('operator'))[-4000:]}") from None
    assert condition(await pods.get("operator"), "Ready") == "False"

    environ = proc(await pods.pid("operator"), "environ").split(b"\0")
    endpoints = kube_control_plane.endpoints()
    assert endpoints is not None
    assert b"KUBERNETES_SERVICE_HOST=127.0.0.1" in environ
    assert f"KUBERNETES_SERVICE_PORT={endpoints.apiserver_port}".encode() in environ

    async with everything_allowed(kube, account, namespace):
        # Its informers sync once the list is allowed: /readyz (on the pod IP) turns the pod Ready.
        await pods.ready("operator", timeout=120)
        assert container_status(await pods.get("operator"))["restartCount"] == 0


async def test_unknown_image_waits_like_a_failed_pull(pods: Pods) -> None:
    await pods.create(pod_body("unpullable", {"image": "example.invalid/nothing:1"}))
    reasons: set[str] = set()

    async def both_seen() -> bool:
        waiting = container_status(await pods.get("unpullable")).get("state", {}).get("waiting", {})
        reasons.add(waiting.get("reason", ""))
        return {"ErrImagePull", "ImagePullBackOff"} <= reasons

    await eventually(both_seen, "ErrImagePull and ImagePullBackOff", 60)
    assert (await pods.get("unpullable"))["status"]["phase"] == "Pending"


def _testbed(*args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "valkey_testbed", *args], capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stderr


async def test_cli_up_runs_nodes_and_down_stops_pods_even_after_a_kubelet_crash(tmp_path: Path) -> None:
    state = tmp_path / "bed"
    await asyncio.to_thread(_testbed, "up", "--state-dir", str(state), "--nodes", "1")
    plane = ControlPlane(state)
    started = plane.records()
    try:
        kubelet_record = plane.kubelet_record()
        assert kubelet_record is not None and kubelet_record.alive()
        assert {r.name for r in started} == {
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "local-path-provisioner",  # with nodes: the default StorageClass's provisioner
        }
        configuration = k8s.Configuration()
        await k8s_config.load_kube_config(
            config_file=str(plane.kubeconfig), client_configuration=configuration
        )
        async with k8s.ApiClient(configuration) as api:
            kube = Client(RestClient(api), field_manager="tests")
            assert [n["metadata"]["name"] for n in await kube.list(NODES)] == ["node-1"]
            body = pod_body("lonely", busybox("exec sleep 3600"))
            body["metadata"]["namespace"] = "default"
            await kube.create(PODS, body)
            control = KubeletControl(state)

            async def running_pid() -> int | None:
                view = await control.pod("default", "lonely")
                return view["containers"][0]["pid"] if view else None

            pid = process(await eventually(running_pid, "the pod's process", 60))
        os.kill(kubelet_record.pid, signal.SIGKILL)  # the kubelet crashes; its pod keeps running
        await eventually(lambda: not kubelet_record.alive(), "the kubelet to die", 10)
        assert alive(pid)
    finally:
        await asyncio.to_thread(_testbed, "down", "--state-dir", str(state))
    assert not alive(pid), "down must stop pod processes from their records"
    assert plane.kubelet_record() is None
    assert not [r.name for r in started if r.alive()], "down stops the control plane and the provisioner"


async def test_three_hand_built_valkey_pods_form_a_cluster(
    pods: Pods, kubelet: KubeletControl, namespace: str
) -> None:
    """No operator: three valkey/valkey pods, each bound to its own pod IP, joined by valkey-cli."""
    image = images.newest_image()
    assert images.resolve_image(image), f"{image} is not installed: run `python -m valkey_testbed build`"
    args = [
        "--bind", "$(POD_IP)", "--port", "6379", "--protected-mode", "no",
        "--cluster-enabled", "yes", "--cluster-announce-ip", "$(POD_IP)", "--cluster-node-timeout", "5000",
        "--dir", "/data", "--save", "", "--appendonly", "no",
    ]  # fmt: skip
    ping = ["sh", "-c", 'valkey-cli -h "$POD_IP" ping | grep -q PONG']
    names = [f"valkey-{i}" for i in range(3)]
    for name in names:
        container = {
            "image": image,
            "args": args,
            "env": POD_IP_ENV,
            "ports": [{"name": "valkey", "containerPort": 6379}],
            "readinessProbe": {"tcpSocket": {"port": "valkey"}, "periodSeconds": 1},
            "livenessProbe": {"exec": {"command": ping}, "periodSeconds": 5, "timeoutSeconds": 5},
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        }
        await pods.create(pod_body(name, container, volumes=[{"name": "data", "emptyDir": {}}]))
    ips = [(await pods.ready(name, timeout=90))["status"]["podIP"] for name in names]
    assert len(set(ips)) == 3
    created = await kubelet.exec(
        namespace,
        names[0],
        "main",
        ["valkey-cli", "--cluster", "create", *(f"{ip}:6379" for ip in ips), "--cluster-yes"],
        timeout=60,
    )
    assert created.exit_code == 0, created.output.decode()[-2000:]

    async def cluster_ok() -> bool:
        info = await kubelet.exec(
            namespace, names[1], "main", ["valkey-cli", "-h", ips[1], "cluster", "info"]
        )
        return b"cluster_state:ok" in info.output

    await eventually(cluster_ok, "cluster_state:ok", 60)
    from valkey.asyncio.cluster import ValkeyCluster

    cluster = ValkeyCluster(host=ips[2], port=6379, decode_responses=True)
    try:
        for index in range(20):
            await cluster.set(f"key-{index}", f"value-{index}")
        assert [await cluster.get(f"key-{index}") for index in range(20)] == [f"value-{i}" for i in range(20)]
        announced = {node.host for node in cluster.get_nodes()}
        assert announced == set(ips), "every node announces its own pod IP"
    finally:
        await cluster.aclose()


async def test_ready_waits_for_a_readiness_gate_and_the_kubelet_never_writes_over_its_condition(
    kube: Client, pods: Pods, namespace: str
) -> None:
    """As a real kubelet: Ready is ContainersReady and every gate True; the gate's condition belongs
    to whoever sets it, and the kubelet's own status writes (here: setting Ready back after another
    writer cleared it) leave it as it is."""
    gate = "example.com/member"
    probe = {"exec": {"command": ["true"]}, "periodSeconds": 1}
    body = pod_body("gated", busybox("exec sleep 3600", readinessProbe=probe))
    body["spec"]["readinessGates"] = [{"conditionType": gate}]
    await pods.create(body)
    pod = await pods.wait(
        "gated", lambda p: condition(p, "ContainersReady") == "True", 60, "containers ready"
    )
    assert condition(pod, "Ready") == "False", pod["status"]

    async def set_gate(status: str) -> None:
        entry = {"type": gate, "status": status, "lastTransitionTime": "2026-01-01T00:00:00Z"}
        patch = {"status": {"conditions": [entry]}}
        await kube.patch_status(PODS, "gated", patch, namespace, patch_type=STRATEGIC_MERGE_PATCH)

    await set_gate("True")
    pod = await pods.ready("gated", timeout=30)
    for attempt in range(5):
        cleared = {"type": "Ready", "status": "False", "reason": "NodeNotReady"}
        await kube.patch_status(
            PODS, "gated", {"status": {"conditions": [cleared]}}, namespace, patch_type=STRATEGIC_MERGE_PATCH
        )
        pod = await pods.ready("gated", timeout=30)
        assert condition(pod, gate) == "True", (attempt, pod["status"]["conditions"])
        assert "reason" not in next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    await set_gate("False")
    pod = await pods.wait(
        "gated", lambda p: condition(p, "Ready") == "False", 30, "not Ready without its gate"
    )
    assert condition(pod, "ContainersReady") == "True"
