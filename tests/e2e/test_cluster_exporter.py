"""The optional redis_exporter sidecar end to end: real pods running the real exporter image next to
real valkey-servers, scraped on pod-ip:9121 directly and by a real Prometheus discovering pods as the
chart's PodMonitor selects them; its Valkey user reads statistics and nothing else; TLS is refused.
"""

from __future__ import annotations

import asyncio
import base64
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_operator import ChartOperator
from chart_support import CHART, RELEASE, helm, set_flags
from cluster_support import Catalog, cli, create_cluster, image_config, owned_pods, settled, superuser_client

from controllers.cluster.render import exporter
from controllers.shared import names
from valkey_operator.api.resources import EXPORTER_USER, VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import SECRETS
from valkey_operator.core.rest import ApiError, Obj
from valkey_testbed import images, kubeversion, redisexporter
from valkey_testbed import prometheus as prom
from valkey_testbed.build import binaries
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds"), pytest.mark.timeout(420)]

NAME = "metrics"
ENABLED = {"metrics": {"exporter": {"enabled": True}}}


async def scrape(ip: str) -> dict[str, float]:
    result = await asyncio.to_thread(redisexporter.scrape, (ip, exporter.PORT))
    return result.samples()


def pod_monitor(kubeconfig: Path, namespace: str) -> Obj:
    """The chart's PodMonitor for the sidecars, as helm renders it."""
    text = helm(
        kubeconfig, "template", RELEASE, str(CHART), "-n", namespace,
        "--kube-version", kubeversion.selected().kubernetes,
        *set_flags(("metrics.exporter.podMonitor.enabled=true",)),
    )  # fmt: skip
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    monitors: list[Obj] = [
        d for d in docs if d["kind"] == "PodMonitor" and d["metadata"]["name"].endswith("exporter")
    ]
    (monitor,) = monitors
    return monitor


@contextmanager
def running_prometheus(scrape_job: prom.PodScrape, directory: Path) -> Iterator[prom.Prometheus]:
    assert binaries().prometheus.exists(), "run `python -m valkey_testbed build`"
    server = prom.start([scrape_job], directory=directory)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


async def test_the_sidecar_serves_redis_series_on_the_pod_ip_with_a_read_only_user(
    kube: Client,
    namespace: str,
    operator: ChartOperator,
    catalog: Catalog,
    kubeconfig_path: Path,
    tmp_path: Path,
) -> None:
    config = await image_config(catalog, images.newest_image())
    await create_cluster(kube, namespace, NAME, config, 1, 1, **ENABLED)
    status = await settled(kube, namespace, NAME, 240)
    pods = await owned_pods(kube, namespace, NAME)
    assert len(pods) == 2
    roles = {node["ip"]: node["role"] for node in status["nodes"]}
    for pod in pods:
        (sidecar,) = pod["spec"]["initContainers"]
        assert sidecar["image"] == images.EXPORTER_IMAGE and sidecar["restartPolicy"] == "Always"
        ip = pod["status"]["podIP"]

        async def served(ip: str = ip) -> dict[str, float] | NotYet:
            try:
                samples = await scrape(ip)
            except OSError as exc:
                return NotYet(str(exc))
            return samples if samples.get("redis_up") == 1 else NotYet(samples.get("redis_up"))

        samples = await eventually(served, f"redis_up 1 on {ip}:{exporter.PORT}", 60)
        assert samples['redis_exporter_last_scrape_error{err=""}'] == 0
        assert samples["redis_cluster_enabled"] == 1
        assert samples["redis_cluster_state"] == 1
        assert samples["redis_cluster_slots_assigned"] == 16384
        role = "master" if roles[ip] == "primary" else "slave"
        (info,) = [series for series in samples if series.startswith("redis_instance_info{")]
        assert f'role="{role}"' in info, info
        assert samples["redis_connected_slaves"] == (1 if roles[ip] == "primary" else 0)
        # Only on the pod IP: nothing answers on the wildcard's loopback default.
        with pytest.raises(OSError):
            await asyncio.to_thread(redisexporter.scrape, ("127.0.0.1", exporter.PORT), 1.0)

    # Its user: statistics yes, data and configuration no.
    secret = await kube.get(SECRETS, names.secret_name(NAME), namespace)
    password = base64.b64decode(secret["data"][exporter.EXPORTER_PASSWORD_KEY]).decode()
    ip = pods[0]["status"]["podIP"]
    assert "redis_version" in await cli(ip, EXPORTER_USER, password, "INFO", "server")
    assert "NOPERM" in await cli(ip, EXPORTER_USER, password, "GET", "k")
    assert "NOPERM" in await cli(ip, EXPORTER_USER, password, "CONFIG", "GET", "masterauth")
    assert "NOPERM" in await cli(ip, EXPORTER_USER, password, "SET", "k", "v")

    # A real Prometheus discovering pods as the chart's PodMonitor selects them scrapes every sidecar.
    monitor = pod_monitor(kubeconfig_path, namespace)
    selector = ",".join(f"{k}={v}" for k, v in sorted(monitor["spec"]["selector"]["matchLabels"].items()))
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    job = prom.PodScrape(kubeconfig_path, (namespace,), selector, job="valkey", port_name=endpoint["port"])
    with running_prometheus(job, tmp_path / "prometheus") as server:

        async def both_up() -> list[Any] | NotYet:
            found = await asyncio.to_thread(server.query, 'redis_up{job="valkey"}')
            values = [float(sample["value"][1]) for sample in found]
            return found if values == [1.0, 1.0] else NotYet(found)

        found = await eventually(both_up, "Prometheus: redis_up 1 for both pods", 60)
        assert {sample["metric"]["pod"] for sample in found} == {p["metadata"]["name"] for p in pods}
        ops = await asyncio.to_thread(server.query, "redis_commands_processed_total")
        assert len(ops) == 2 and all(math.isfinite(float(s["value"][1])) for s in ops)

    # Its liveness probe (httpGet /health on the named port) passed all along: never restarted.
    for pod in await owned_pods(kube, namespace, NAME):
        (state,) = pod["status"]["initContainerStatuses"]
        assert state["name"] == exporter.CONTAINER_NAME and state["restartCount"] == 0, state
        assert state.get("started") is True and "running" in state["state"], state


async def acl_users(kube: Client, namespace: str, name: str, ip: str) -> list[str]:
    async with superuser_client().connect(ip) as node:
        users = await node.command("ACL", "USERS")
    return sorted(user.decode() if isinstance(user, bytes) else str(user) for user in users)


async def test_turning_it_on_and_off_rolls_the_pods_and_adds_then_removes_its_user(
    kube: Client, namespace: str, operator: ChartOperator, catalog: Catalog
) -> None:
    config = await image_config(catalog, images.newest_image())
    await create_cluster(kube, namespace, NAME, config, 1, 1)
    await settled(kube, namespace, NAME, 240)
    before = {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, NAME)}
    ip = (await owned_pods(kube, namespace, NAME))[0]["status"]["podIP"]
    assert EXPORTER_USER not in await acl_users(kube, namespace, NAME, ip)

    await kube.patch(VALKEY_CLUSTERS, NAME, {"spec": ENABLED}, namespace)
    await settled(kube, namespace, NAME, 300)
    pods = await owned_pods(kube, namespace, NAME)
    assert not before & {pod["metadata"]["uid"] for pod in pods}, "every pod replaced"
    for pod in pods:
        assert [c["name"] for c in pod["spec"]["initContainers"]] == [exporter.CONTAINER_NAME]
        samples = await scrape(pod["status"]["podIP"])
        assert samples["redis_up"] == 1
        assert EXPORTER_USER in await acl_users(kube, namespace, NAME, pod["status"]["podIP"])

    await kube.patch(
        VALKEY_CLUSTERS, NAME, {"spec": {"metrics": {"exporter": {"enabled": False}}}}, namespace
    )
    await settled(kube, namespace, NAME, 300)
    for pod in await owned_pods(kube, namespace, NAME):
        assert "initContainers" not in pod["spec"]
        assert EXPORTER_USER not in await acl_users(kube, namespace, NAME, pod["status"]["podIP"])
    secret = await kube.get(SECRETS, names.secret_name(NAME), namespace)
    assert exporter.EXPORTER_PASSWORD_KEY not in secret["data"]


async def test_a_tls_cluster_with_the_sidecar_is_refused_with_the_reason(
    kube: Client, namespace: str
) -> None:
    with pytest.raises(ApiError) as refused:
        await create_cluster(kube, namespace, "tls-metrics", "cfg", 1, 0, tls={"secretRef": "tls"}, **ENABLED)
    assert refused.value.status == 422
    assert "metrics.exporter cannot be enabled on a TLS cluster" in str(refused.value)
