"""The operator under test as users install it: a Helm release of this checkout's chart, its pod run
from this checkout's image (pinned by digest) by the test bed's kubelet with runc, as uid 65532 on a
read-only root, under the chart's ServiceAccount and least-privilege RBAC, with the chart's flags.

One release per test, namespaced: it watches the test's namespace only and lives in it, so tests
running beside it keep their own operators. The tests apply the CRDs themselves (`valkey_crds`), so
the release renders none (`crds.enabled=false`): one release owns CRDs at a time. Every
cluster-scoped object the chart creates is named after the release, which is unique.

What tests ask of an operator goes through the pod, never inside a process: metrics by scraping its
/metrics, restarts by deleting the pod or scaling the Deployment, logs through pods/log.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from chart_support import CHART, helm, kubectl, set_flags
from prometheus_client.parser import text_string_to_metric_families

from valkey_operator.core.client import Client
from valkey_operator.core.metrics import RESULTS
from valkey_operator.core.resource import DEPLOYMENTS, LEASES, PODS
from valkey_operator.core.rest import Obj
from valkey_testbed import operatorimage
from valkey_testbed.wait import NotYet, eventually

METRICS_PORT = 8080
"""The chart's metrics.port default: the operator pod serves /metrics on its IP there."""
LEASE = "valkey-operator-leader"
"""The chart's leaderElection.leaseName default, in the release namespace."""
READY_WITHIN = 120.0
"""A pod scheduled, its container started from the unpacked image and the Lease taken (a test's
whole setup measured 1.9-3.5 s on the shared 2-core machine; the bound is for a loaded CI run)."""

Labels = Mapping[str, str]
SampleKey = tuple[str, frozenset[tuple[str, str]]]


def release_name() -> str:
    """vo-<hex>: short (object names are prefixed with it) and unique on the control plane."""
    return f"vo-{uuid.uuid4().hex[:8]}"


class ChartOperator:
    """A chart release of the operator, one replica, watching (and living in) one namespace."""

    def __init__(
        self,
        kube: Client,
        kubeconfig: Path,
        namespace: str,
        image: operatorimage.BuiltImage,
        values: Sequence[str] = (),
    ) -> None:
        """values: more `--set` values (operatorConfig.*, extraArgs, extraEnv, workers.*)."""
        self.kube = kube
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.image = image
        self.values = tuple(values)
        self.release = release_name()
        self.deployment = f"{self.release}-valkey-operator"
        self.pod_name = ""
        self.pod_ip = ""
        self.install_seconds = 0.0
        self.ready_seconds = 0.0
        self.earlier_logs: list[str] = []
        """Logs of the pods this object stopped or replaced, oldest first."""
        self._carried: dict[SampleKey, float] = {}
        """Counters (*_total) of the pods stopped or replaced, so a count spans restarts as the
        in-process operator's registry did."""

    def chart_values(self) -> list[str]:
        return [
            f"watchNamespaces={{{self.namespace}}}",
            f"image.digest={self.image.digest}",
            "replicaCount=1",
            "crds.enabled=false",
            "tests.enabled=false",
            *self.values,
        ]

    async def install(self) -> None:
        """helm install, then the pod holding the Lease: reconciling has begun when this returns.
        Not `--wait`: the Lease comes before the pod's first successful readiness probe (every 5 s),
        a few seconds a test need not wait."""
        started = time.monotonic()
        args = ["install", self.release, str(CHART), "-n", self.namespace]
        await asyncio.to_thread(helm, self.kubeconfig, *args, *set_flags(self.chart_values()))
        self.install_seconds = time.monotonic() - started
        await self._leading(started)

    async def uninstall(self) -> None:
        """helm uninstall, not waited for: the namespace goes next and takes the pod with it; the
        release's cluster-scoped RBAC is deleted by helm before it returns."""
        await asyncio.to_thread(helm, self.kubeconfig, "uninstall", self.release, "-n", self.namespace)

    async def _pods(self) -> list[Obj]:
        selector = f"app.kubernetes.io/instance={self.release}"
        return await self.kube.list(PODS, self.namespace, label_selector=selector)

    async def _leading(self, started: float, previous: str = "") -> None:
        """Wait for a running pod (not `previous`) that holds the Lease; remember its name and IP."""

        async def leader() -> tuple[str, str] | NotYet:
            pods = [p for p in await self._pods() if not p["metadata"].get("deletionTimestamp")]
            running = [
                p
                for p in pods
                if p["metadata"]["name"] != previous and p.get("status", {}).get("phase") == "Running"
            ]
            lease = await self.kube.get_or_none(LEASES, LEASE, self.namespace)
            holder = ((lease or {}).get("spec") or {}).get("holderIdentity") or ""
            for pod in running:
                if holder.rsplit("_", 1)[0] == pod["metadata"]["name"]:
                    return pod["metadata"]["name"], pod["status"]["podIP"]
            phases = {p["metadata"]["name"]: p.get("status", {}).get("phase") for p in pods}
            return NotYet({"pods": phases, "holder": holder})

        self.pod_name, self.pod_ip = await eventually(
            leader, f"operator {self.release} running and leading", READY_WITHIN, interval=0.2
        )
        self.ready_seconds = time.monotonic() - started

    async def _scale(self, replicas: int) -> None:
        await self.kube.patch(DEPLOYMENTS, self.deployment, {"spec": {"replicas": replicas}}, self.namespace)

    async def _keep_counters_and_logs(self) -> None:
        if not self.pod_name:
            return
        try:
            text = await self.metrics_text()
        except OSError:
            text = ""
        for key, value in parse_samples(text).items():
            if key[0].endswith("_total"):
                self._carried[key] = self._carried.get(key, 0.0) + value
        self.earlier_logs.append(await self.logs())

    async def stop(self) -> None:
        """Scale the Deployment to 0: SIGTERM, the operator drains and releases its Lease."""
        await self._keep_counters_and_logs()
        await self._scale(0)

        async def gone() -> bool | NotYet:
            pods = await self._pods()
            return not pods or NotYet([p["metadata"]["name"] for p in pods])

        await eventually(gone, f"operator {self.release} stopped", 60, interval=0.2)
        self.pod_name = self.pod_ip = ""

    async def start(self) -> None:
        """Scale the Deployment back to 1 and wait for the new pod to lead."""
        started = time.monotonic()
        await self._scale(1)
        await self._leading(started)

    async def restart(self) -> None:
        """Delete the operator pod (as a node drain or `kubectl delete pod` would); its ReplicaSet
        makes another, which takes the Lease the old one released."""
        started, previous = time.monotonic(), self.pod_name
        await self._keep_counters_and_logs()
        await self.kube.delete(PODS, previous, self.namespace)
        await self._leading(started, previous=previous)

    async def metrics_text(self) -> str:
        url = f"http://{self.pod_ip}:{METRICS_PORT}/metrics"

        def fetch() -> str:
            with urllib.request.urlopen(url, timeout=10) as response:
                body: bytes = response.read()
            return body.decode()

        return await asyncio.to_thread(fetch)

    async def sample(self, name: str, labels: Labels) -> float | None:
        """One sample of the operator's /metrics (counters summed over the pods this object
        restarted), or None when the operator exports none with these labels."""
        key = sample_key(name, labels)
        current = parse_samples(await self.metrics_text()).get(key)
        carried = self._carried.get(key)
        if current is None and carried is None:
            return None
        return (current or 0.0) + (carried or 0.0)

    async def reconciles(self, controller: str) -> int:
        """Passes the named controller (valkeycluster, valkeyimage, ...) finished, whatever their result."""
        samples = parse_samples(await self.metrics_text())
        total = 0.0
        for result in RESULTS:
            key = sample_key(
                "controller_runtime_reconcile_total", {"controller": controller, "result": result}
            )
            total += samples.get(key, 0.0) + self._carried.get(key, 0.0)
        return int(total)

    async def logs(self) -> str:
        """The running pod's log (JSON lines), through the API server's pods/log."""
        if not self.pod_name:
            return ""
        args = ("logs", self.pod_name, "-n", self.namespace, "-c", "operator")
        return await asyncio.to_thread(kubectl, self.kubeconfig, *args, check=False)


def sample_key(name: str, labels: Labels) -> SampleKey:
    return name, frozenset(labels.items())


def parse_samples(text: str) -> dict[SampleKey, float]:
    """Every sample of a Prometheus text exposition, by name and labels."""
    return {
        sample_key(sample.name, sample.labels): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
