"""A real Prometheus discovers the operator's pods and scrapes what the dashboard and alerts query.

Two operator replicas (`valkey-operator:dev`, leader election on) run as a
Deployment on the test bed's process kubelet; Prometheus finds them through
the API server (kubernetes_sd_configs, role pod) and scrapes each on its
container port named `metrics` at its pod IP. A small ValkeyCluster gives the
per-node gauges. Then every dashboard panel and every alert expression is
evaluated against that Prometheus: a query error (a typo, a bad function or
matcher) fails the test; an empty result is fine (nothing failed here).

RBAC here is cluster-admin-like on purpose: this test is about metrics; the
chart's least-privilege rules are tested with the chart.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from cluster_scoped import ClusterScoped
from rbac_support import SERVICE_ACCOUNTS, everything_allowed

from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_IMAGES
from valkey_operator.core.client import Client
from valkey_operator.core.resource import DEPLOYMENTS, PODS
from valkey_operator.testing import images
from valkey_operator.testing import prometheus as prom
from valkey_operator.testing.build import binaries
from valkey_operator.testing.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240), pytest.mark.usefixtures("valkey_crds")]

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "charts" / "valkey-operator" / "files" / "dashboard.json"
ALERTS = ROOT / "charts" / "valkey-operator" / "files" / "alerts.yaml"

OPERATOR = "valkey-operator:dev"
APP_LABEL = "app.kubernetes.io/name"
APP = "valkey-operator"
REPLICAS = 2
CONTROLLERS = {"valkeyimage", "valkeyconfig", "valkeyrole", "valkeycluster"}
CLUSTER = "metrics"
# Grafana's variables, as the dashboard's defaults ("All") expand them.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$namespace": ".*", "$cluster": ".*"}

Obj = dict[str, Any]


def operator_deployment(namespace: str, account: str) -> Obj:
    """The operator as the chart runs it: listeners on the pod IP, a metrics port named `metrics`."""
    container = {
        "name": "manager",
        "image": OPERATOR,
        "args": [
            "--metrics-bind-address=$(POD_IP):8080",
            "--health-probe-bind-address=$(POD_IP):8081",
            "--log-format=json",
            "--node-networks=127.0.0.0/8",
            "--leader-elect",
            f"--leader-election-namespace={namespace}",
            f"--namespace={namespace}",
        ],
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        ],
        "ports": [
            {"name": "metrics", "containerPort": 8080},
            {"name": "health", "containerPort": 8081},
        ],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081}, "periodSeconds": 2},
        "securityContext": {"runAsNonRoot": True},
    }
    labels = {APP_LABEL: APP}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": APP, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": account,
                    "terminationGracePeriodSeconds": 5,
                    "containers": [container],
                },
            },
        },
    }


@pytest_asyncio.fixture
async def operator_pods(kube: Client, namespace: str) -> AsyncIterator[list[str]]:
    """Two operator replicas running under a ServiceAccount allowed everything; their pod names."""
    account = "valkey-operator"
    await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": account, "namespace": namespace}})
    async with everything_allowed(kube, account, namespace):
        await kube.create(DEPLOYMENTS, operator_deployment(namespace, account))
        try:

            async def running() -> list[str] | NotYet:
                pods = await kube.list(PODS, namespace, label_selector=f"{APP_LABEL}={APP}")
                phases = {p["metadata"]["name"]: p.get("status", {}).get("phase") for p in pods}
                return sorted(phases) if list(phases.values()) == ["Running"] * REPLICAS else NotYet(phases)

            yield await eventually(running, f"{REPLICAS} operator pods Running", 90, interval=0.5)
        finally:
            await kube.delete(DEPLOYMENTS, APP, namespace)


@pytest.fixture
def prometheus(kubeconfig_path: Path, namespace: str, tmp_path: Path) -> Iterator[prom.Prometheus]:
    """Prometheus discovering this namespace's operator pods, stopped (by pid) afterwards."""
    executable = binaries().prometheus
    assert executable.exists(), f"{executable} is missing: run `python -m valkey_operator.testing build`"
    scrape = prom.PodScrape(kubeconfig_path, (namespace,), f"{APP_LABEL}={APP}")
    server = prom.start([scrape], directory=tmp_path / "prometheus")
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


async def query(server: prom.Prometheus, expr: str) -> list[Obj]:
    return await asyncio.to_thread(server.query, expr)


async def series_by(server: prom.Prometheus, expr: str, label: str) -> dict[str, float]:
    """label value -> sample value of each series expr returns."""
    return {s["metric"].get(label, ""): float(s["value"][1]) for s in await query(server, expr)}


def dashboard_exprs() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    found = []
    stack = list(dashboard["panels"])
    while stack:
        panel = stack.pop()
        stack.extend(panel.get("panels", []))
        found.extend((f"panel {panel['title']!r}", t["expr"]) for t in panel.get("targets", []))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            match = re.fullmatch(r"label_values\((.+),\s*\w+\)", variable["query"]["query"])
            assert match, variable
            found.append((f"variable {variable['name']}", match.group(1)))
    return found


def alert_exprs() -> list[tuple[str, str]]:
    rules = yaml.safe_load(ALERTS.read_text())
    return [(f"alert {r['alert']}", r["expr"]) for group in rules["groups"] for r in group["rules"]]


def grafana_expanded(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"a dashboard variable this test does not expand: {expr}"
    return expr


async def create_valkey_cluster(kube: Client, scoped: ClusterScoped, namespace: str) -> None:
    """One shard with one replica of the newest catalog Valkey: primary and replica series."""
    image = images.newest_image()
    assert images.resolve_image(image), f"{image} is not installed (python -m valkey_operator.testing build)"
    version = images.valkey_version(image)
    spec = {"repository": "valkey/valkey", "tag": version, "version": version}
    await scoped.create(VALKEY_IMAGES, {"metadata": {"name": scoped("img")}, "spec": spec})
    config = {"imageRef": scoped("img"), "valkey": {"cluster-node-timeout": "5000"}}
    await scoped.create(VALKEY_CONFIGS, {"metadata": {"name": scoped("cfg")}, "spec": config})
    body = {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": CLUSTER, "namespace": namespace},
        "spec": {"configRef": scoped("cfg"), "shards": 1, "replicasPerShard": 1},
    }
    await kube.create(VALKEY_CLUSTERS, body)


async def test_prometheus_scrapes_both_operator_replicas_and_every_dashboard_and_alert_query_runs(
    kube: Client, namespace: str, operator_pods: list[str], prometheus: prom.Prometheus
) -> None:
    assert images.resolve_image(OPERATOR), (
        f"{OPERATOR} is not installed (python -m valkey_operator.testing build)"
    )
    scoped = ClusterScoped(kube, namespace[-6:])
    try:
        await create_valkey_cluster(kube, scoped, namespace)

        async def both_up() -> list[Obj] | NotYet:
            targets = await asyncio.to_thread(prometheus.targets)
            health = {t["labels"].get("pod"): (t["health"], t["lastError"]) for t in targets}
            up = sorted(pod for pod, (state, _) in health.items() if state == "up")
            return targets if up == operator_pods else NotYet(health)

        targets = await eventually(both_up, "both operator pods scraped", 60, interval=1)
        for target in targets:
            assert target["labels"]["job"] == prom.JOB
            assert target["labels"]["namespace"] == namespace
            assert target["scrapeUrl"].endswith(":8080/metrics"), target["scrapeUrl"]

        # Both replicas export every controller's series from the start (zero until it reconciles).
        for pod in operator_pods:
            controllers = await series_by(
                prometheus,
                f'count by (controller) (controller_runtime_reconcile_total{{pod="{pod}"}})',
                "controller",
            )
            assert set(controllers) == CONTROLLERS, (pod, controllers)
            queues = await series_by(prometheus, f'workqueue_depth{{pod="{pod}"}}', "controller")
            assert set(queues) == CONTROLLERS, (pod, queues)

        async def one_leader() -> dict[str, float] | NotYet:
            leaders = await series_by(prometheus, "leader_election_master_status", "pod")
            one = set(leaders) == set(operator_pods) and sorted(leaders.values()) == [0, 1]
            return leaders if one else NotYet(leaders)

        leaders = await eventually(
            one_leader, "one series per operator pod, exactly one at 1", 60, interval=1
        )
        leader = next(pod for pod, value in leaders.items() if value == 1)

        async def nodes_scraped() -> list[Obj] | NotYet:
            selector = f'namespace="{namespace}", cluster="{CLUSTER}"'
            roles = await series_by(prometheus, f"valkey_node_role{{{selector}}} == 1", "role")
            state_ok = await query(prometheus, f"valkey_node_cluster_state_ok{{{selector}}}")
            values = [float(s["value"][1]) for s in state_ok]
            done = sorted(roles) == ["primary", "replica"] and values == [1.0, 1.0]
            return state_ok if done else NotYet((roles, state_ok))

        state_ok = await eventually(
            nodes_scraped, "a primary and a replica, both cluster_state ok", 150, interval=1
        )
        # The per-cluster state names the cluster (what the cluster alerts aggregate by).
        cluster_selector = f'namespace="{namespace}", cluster="{CLUSTER}"'
        expected = {"Active": 1, "Creating": 0, "Updating": 0, "Failed": 0}

        async def active() -> dict[str, float] | NotYet:  # Active a pass after the nodes report ok
            query_ = f"valkey_operator_cluster_state{{{cluster_selector}}}"
            states = await series_by(prometheus, query_, "state")
            return states if states == expected else NotYet(states)

        await eventually(active, "the cluster's state series at Active", 60, interval=1)
        # Per-node series keep the Valkey pods' labels (honor_labels), not the operator pod's.
        assert {s["metric"]["pod"] for s in state_ok}.isdisjoint(operator_pods)
        leader_instance = next(t["labels"]["instance"] for t in targets if t["labels"]["pod"] == leader)
        assert {s["metric"]["instance"] for s in state_ok} == {leader_instance}, (
            "only the leader reports nodes"
        )
        # Only the leader reconciles (mostly requeue_after: the cluster controller re-checks on a timer).
        reconciled = await series_by(
            prometheus, 'sum by (pod) (controller_runtime_reconcile_total{controller="valkeycluster"})', "pod"
        )
        assert reconciled[leader] > 0, reconciled
        assert [value for pod, value in reconciled.items() if pod != leader] == [0], reconciled

        failures = []
        exprs = [(where, grafana_expanded(expr)) for where, expr in dashboard_exprs()] + alert_exprs()
        for where, expr in exprs:
            try:
                await query(prometheus, expr)
            except prom.PrometheusError as exc:
                failures.append(f"{where}: {exc}")
        assert failures == [], "\n".join(failures)
        # Populated, not only valid: the reconcile-time panel's histogram gets data (rate() needs two
        # scrapes of a series that appears at the first reconcile).
        p99 = (
            "histogram_quantile(0.99, sum by (controller, le) "
            "(rate(controller_runtime_reconcile_time_seconds_bucket[1m])))"
        )
        await eventually(lambda: query(prometheus, p99), "reconcile time p99 samples", 30, interval=1)
    finally:
        await kube.delete(VALKEY_CLUSTERS, CLUSTER, namespace)
        await scoped.cleanup()
