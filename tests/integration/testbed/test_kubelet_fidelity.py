"""What a real kubelet and runtime give a pod that workloads written for real clusters rely on.

Found by running the official operator on the test bed: a Secret mounted inside a read-only
ConfigMap mount (its /config/users inside /config), and exec probes dialling `localhost`, which
must reach the pod's own listener although pods share the host's network here.
"""

from __future__ import annotations

import pytest
from kubelet_support import BUSYBOX, POD_IP_ENV, Pods, busybox, pod_body

from valkey_operator.core.client import Client
from valkey_operator.core.resource import CONFIG_MAPS, SECRETS
from valkey_testbed import images
from valkey_testbed.kubelet import KubeletControl

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

NESTED_VOLUMES = [
    {"name": "conf", "configMap": {"name": "conf"}},
    {"name": "users", "secret": {"secretName": "users"}},
]
NESTED_MOUNTS = [
    {"name": "conf", "mountPath": "/config", "readOnly": True},
    {"name": "users", "mountPath": "/config/users", "readOnly": True},
]


async def nested_sources(kube: Client, namespace: str) -> None:
    await kube.create(
        CONFIG_MAPS,
        {"metadata": {"name": "conf", "namespace": namespace}, "data": {"valkey.conf": "port 6379\n"}},
    )
    await kube.create(
        SECRETS,
        {"metadata": {"name": "users", "namespace": namespace}, "stringData": {"users.acl": "user x on\n"}},
    )


async def test_a_secret_mounted_inside_a_read_only_configmap_mount_is_seen_with_it(
    kube: Client, kubelet: KubeletControl, pods: Pods, namespace: str
) -> None:
    await nested_sources(kube, namespace)
    script = "cat /config/valkey.conf /config/users/users.acl; echo listed; exec sleep 3600"
    container = busybox(script, volumeMounts=NESTED_MOUNTS)
    await pods.create(pod_body("nested", container, volumes=NESTED_VOLUMES))
    await pods.ready("nested")
    log = await pods.wait_log("nested", "listed")
    assert "port 6379" in log and "user x on" in log
    write = await kubelet.exec(namespace, "nested", "main", ["sh", "-c", "echo x > /config/x"])
    assert write.exit_code != 0 and b"Read-only file system" in write.output, "the parent stays read-only"


async def test_localhost_in_a_pod_is_the_pods_own_listener(
    kubelet: KubeletControl, pods: Pods, namespace: str
) -> None:
    """An exec probe `valkey-cli -h localhost` reaches the pod's server bound to its pod IP only."""
    image = images.newest_image()
    assert images.resolve_image(image), f"{image} is not installed"
    ping = ["sh", "-c", "valkey-cli -h localhost -p 6379 PING | grep -q PONG"]
    container = {
        "image": image,
        "args": ["--bind", "$(POD_IP)", "--port", "6379", "--save", "", "--protected-mode", "no"],
        "env": POD_IP_ENV,
        "readinessProbe": {"exec": {"command": ping}, "periodSeconds": 1, "timeoutSeconds": 5},
    }
    await pods.create(pod_body("own", container))
    pod = await pods.ready("own")
    ip = pod["status"]["podIP"]
    hosts = await kubelet.exec(namespace, "own", "main", ["cat", "/etc/hosts"])
    assert f"{ip}\tlocalhost" in hosts.output.decode()
    server = await kubelet.exec(
        namespace, "own", "main", ["valkey-cli", "-h", "localhost", "-p", "6379", "CONFIG", "GET", "bind"]
    )
    assert server.output.decode().split() == ["bind", ip], "the pod's own server answered"


async def test_host_network_pods_keep_the_hosts_loopback_as_localhost(
    kubelet: KubeletControl, pods: Pods, namespace: str
) -> None:
    container = {"image": BUSYBOX, "command": ["sh", "-c", "exec sleep 3600"]}
    await pods.create(pod_body("host", container, hostNetwork=True))
    await pods.ready("host")
    hosts = await kubelet.exec(namespace, "host", "main", ["cat", "/etc/hosts"])
    assert "127.0.0.1\tlocalhost" in hosts.output.decode()
