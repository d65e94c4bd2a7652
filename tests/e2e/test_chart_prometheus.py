"""A real Prometheus scrapes the operator as the chart installs it, and every dashboard panel and
every alert of the chart has live data.

`helm install` runs the chart as users do: its ServiceAccount and least-privilege RBAC, its metrics
Service, two replicas of the operator's OCI image with leader election, watching one namespace,
with operatorConfig.tlsExpiryWarningDays 60. Prometheus finds the pods the chart's metrics Service
selects (by that Service's own selector) and scrapes the container port its targetPort names: no
Service is routable on the test bed, so this is the Service spelled as pod discovery. It evaluates
the alert rules as the chart renders them (the PrometheusRule's spec); the dashboard is the one in
the chart's dashboard ConfigMap.

Four live ValkeyClusters give every panel and alert something to show:
- `tls`, TLS 1x1, whose certificate expires in 30 days: inside the 60-day window, so
  ValkeyCertificateExpiringSoon names both nodes; after `helm upgrade` to 7 days it names none.
- `roll`, 1x1, rolled onto a newer Valkey (a rollout duration, coordinated failovers) and then
  onto an image whose binary is below the version floor: the roll stops while the old pods serve,
  Updating (ValkeyClusterNotActive, ValkeyRolloutFailed, the clusters-not-Active table).
- `failed`, 1x0, created on that image: it serves nothing and is Failed and Stalled
  (ValkeyClusterFailed, ValkeyClusterStalled with reason VersionBelowFloor).
- `store`, 1x1, not a cache (noeviction, 16 MiB maxmemory): its primary is written until it refuses
  writes (ValkeyMemoryNearMaxmemory) and serves reads (hits and misses) while the dashboard is
  checked; its replica gets a wrong primaryauth and is disconnected (ValkeyReplicaLinkDown), so
  the store is Updating with a replica out of sync (ValkeyClusterNotActive).
The redis_* series come from the leader only; at the end the leader pod is deleted and the time
until the new leader's redis_* series are in Prometheus is printed.

Data means a finite sample: a NaN (a quantile of no observations, 0/0) is not counted. Every series
selector inside a query must match too (Prometheus' own parser finds them), so a renamed metric in
one arm of an `or` is caught. Each alert expression must name exactly what the clusters show.
Alerts these clusters cannot raise (no leader, no operator, lag over 100 MB, a failed slot
migration, a timed-out failover, and cluster_state:fail: the one node that reports it is the
surge pod below the version floor, which the operator asks nothing but its version) have their
selectors checked and must name nothing; when they fire is what tests/prometheus/alerts_test.yaml
shows with promtool.

The second test installs one replica with metrics.secure=true and scrapes it as the chart's
ServiceMonitor says: HTTPS, the self-signed certificate unchecked, and the token of Prometheus' own
ServiceAccount (from a TokenRequest, bound to <fullname>-metrics-reader); the test bed has no
Prometheus Operator, so the test translates the rendered endpoint as that operator would.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import math
import re
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import attrs
import pytest
import yaml
from chart_operator import METRICS_PORT, ChartOperator
from chart_support import CHART, RELEASE, adopt_crds, helm, install, set_flags
from cluster_support import (
    NUDGE_ANNOTATION,
    Catalog,
    admin_client,
    create_cluster,
    owned_pods,
    put_tls_secret,
    require_image,
    settled,
    status_of,
)
from inprocess_operator import Operator
from node_metrics_support import break_link, fill, link_status, load, memory_ratio, roles, store_config
from rbac_support import CLUSTER_ROLE_BINDINGS, RBAC, SERVICE_ACCOUNTS, service_account_token

from controllers.shared.versions import meets_floor, version_from_info
from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS
from valkey_operator.core.client import Client
from valkey_operator.core.conditions import find_condition
from valkey_operator.core.resource import PODS, SERVICES
from valkey_operator.core.rest import Obj
from valkey_testbed import certs, images, kubeversion, operatorimage
from valkey_testbed import prometheus as prom
from valkey_testbed.build import binaries
from valkey_testbed.wait import NotYet, eventually

# Adopts the CRDs and installs the chart's ClusterRoles: one Helm release at a time. Its operator
# watches one namespace, so other test-bed modules run beside it.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.testbed_serial("helm"),
    pytest.mark.usefixtures("valkey_crds"),
]

DAY = 86400.0
PROVOKED = ("ValkeyMemoryNearMaxmemory", "ValkeyReplicaLinkDown")
"""The node alerts this test provokes on live Valkey (a filled store, a broken replica link): firing."""
WINDOW_DAYS = 60
"""tlsExpiryWarningDays at install: the TLS cluster's certificate is inside it."""
NARROW_DAYS = 7
"""tlsExpiryWarningDays after the upgrade: the certificate is outside it."""
CERT_DAYS = 30
OLD = "9.1.0"
ACCOUNT = f"{RELEASE}-valkey-operator"
METRICS_SERVICE = f"{RELEASE}-valkey-operator-metrics"
RATE_INTERVAL = "1m"
"""Grafana's $__rate_interval here: 30 scrapes at the test Prometheus' 2 s interval."""

PROJECTED_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
"""Where a pod's own ServiceAccount token is mounted: the bearerTokenFile of the secure ServiceMonitor."""

OPERATOR_SERIES = "controller_runtime_max_concurrent_reconciles"
"""A series the operator exports from its start, one per controller."""

Sample = dict[str, Any]
Identity = tuple[str, ...]


def rendered(kubeconfig: Path, namespace: str, *values: str) -> tuple[Obj, Obj]:
    """The chart's PrometheusRule spec (a rule file) and its dashboard, as helm renders them."""
    text = helm(
        kubeconfig, "template", RELEASE, str(CHART), "-n", namespace,
        "--kube-version", kubeversion.selected().kubernetes,
        *set_flags((*values, "prometheusRule.enabled=true", "dashboard.enabled=true")),
    )  # fmt: skip
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    (rule,) = [doc for doc in docs if doc["kind"] == "PrometheusRule"]
    (board,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard")]
    return rule["spec"], json.loads(board["data"]["valkey-operator.json"])


def service_scrape(service: Obj, kubeconfig: Path) -> prom.PodScrape:
    """What the chart's metrics Service means, as pod discovery: the pods its selector picks, on the
    container port its targetPort names."""
    (port,) = service["spec"]["ports"]
    assert port["name"] == "metrics" and isinstance(port["targetPort"], str), port
    selector = ",".join(f"{key}={value}" for key, value in sorted(service["spec"]["selector"].items()))
    namespace = service["metadata"]["namespace"]
    return prom.PodScrape(kubeconfig, (namespace,), selector, port_name=port["targetPort"])


@contextmanager
def running_prometheus(scrape: prom.PodScrape, rules: Path, directory: Path) -> Iterator[prom.Prometheus]:
    executable = binaries().prometheus
    assert executable.exists(), f"{executable} is missing: run `python -m valkey_testbed build`"
    server = prom.start([scrape], rule_files=[rules], directory=directory)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


async def query(server: prom.Prometheus, expr: str) -> list[Sample]:
    return await asyncio.to_thread(server.query, expr)


def finite(samples: list[Sample]) -> list[Sample]:
    """Samples holding a number: NaN (0/0, a quantile of nothing) and infinities are no data."""
    return [sample for sample in samples if math.isfinite(float(sample["value"][1]))]


def selectors(tree: Any) -> list[str]:
    """Every series selector in a parse tree (/api/v1/parse_query), as a selector of its matchers."""
    found = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            if node.get("type") in ("vectorSelector", "matrixSelector") and "matchers" in node:
                matchers = (f"{m['name']}{m['type']}{json.dumps(m['value'])}" for m in node["matchers"])
                found.append("{" + ", ".join(matchers) + "}")
            else:
                stack.extend(node.values())
    return found


def dashboard_queries(board: Obj, namespace: str) -> list[tuple[str, str]]:
    """(where, query) of every panel target and template variable, with the variables as Grafana
    expands them for this test's namespace and every cluster."""
    variables = {"$__rate_interval": RATE_INTERVAL, "$namespace": namespace, "$cluster": ".*"}
    found: list[tuple[str, str]] = []
    stack = list(board["panels"])
    while stack:
        panel = stack.pop()
        stack.extend(panel.get("panels", []))
        found.extend((f"panel {panel['title']!r}", target["expr"]) for target in panel.get("targets", []))
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            match = re.fullmatch(r"label_values\((.+),\s*\w+\)", variable["query"]["query"])
            assert match, variable
            found.append((f"variable {variable['name']}", match.group(1)))
    expanded = []
    for where, expr in found:
        text = expr
        for variable, value in variables.items():
            text = text.replace(variable, value)
        assert "$" not in text, f"{where}: a dashboard variable this test does not expand: {text}"
        expanded.append((where, text))
    return expanded


def alert_rules(rule_file: Obj) -> dict[str, str]:
    return {rule["alert"]: rule["expr"] for group in rule_file["groups"] for rule in group["rules"]}


async def gaps(server: prom.Prometheus, where: str, expr: str, *, whole: bool) -> list[str]:
    """What has no data: the query itself (when whole) and each series selector inside it."""
    found = []
    if whole and not finite(await query(server, expr)):
        found.append(f"{where}: no finite sample from {expr}")
    for selector in selectors(await asyncio.to_thread(server.parse, expr)):
        if not finite(await query(server, selector)):
            found.append(f"{where}: nothing matches {selector}")
    return found


def identity(labels: dict[str, str]) -> Identity:
    """What an alert names: its namespace, cluster and pod labels, those it has."""
    return tuple(labels[key] for key in ("namespace", "cluster", "pod") if key in labels)


async def pod_names(kube: Client, namespace: str, cluster: str) -> list[str]:
    return sorted(pod["metadata"]["name"] for pod in await owned_pods(kube, namespace, cluster))


async def failing_nodes(kube: Client, namespace: str, cluster: str) -> set[str]:
    """The pods of a (plain-text) cluster whose own CLUSTER INFO says cluster_state:fail, among those
    at or above the version floor: a node below it is asked nothing but its version, by design."""
    admin = await admin_client(kube, namespace, cluster)
    failing = set()
    for pod in await owned_pods(kube, namespace, cluster):
        ip = pod.get("status", {}).get("podIP")
        assert ip, pod["metadata"]["name"]
        async with admin.connect(ip) as node:
            version = version_from_info(await node.info("server"))
            state = (await node.cluster_info())["cluster_state"]
        if meets_floor(version) and state == "fail":
            failing.add(pod["metadata"]["name"])
    return failing


async def state_of(kube: Client, namespace: str, name: str, state: str, timeout: float) -> Obj:
    async def reached() -> Obj | NotYet:
        status = await status_of(kube, namespace, name)
        return status if status.get("state") == state else NotYet(status.get("message"))

    return await eventually(reached, f"{name} {state}", timeout, interval=0.5)


async def stopped_roll(kube: Client, namespace: str, name: str, timeout: float) -> Obj:
    """The roll stopped at a binary below the floor: Progressing=False, reason VersionBelowFloor."""

    async def reached() -> Obj | NotYet:
        status = await status_of(kube, namespace, name)
        progressing = find_condition(status.get("conditions"), "Progressing") or {}
        done = (progressing.get("status"), progressing.get("reason")) == ("False", "VersionBelowFloor")
        return status if done else NotYet(status.get("message"))

    return await eventually(reached, f"{name}'s roll stopped at the floor", timeout, interval=0.5)


async def rolled(kube: Client, namespace: str, name: str, image: str, timeout: float) -> Obj:
    async def done() -> Obj | NotYet:
        status = await status_of(kube, namespace, name)
        finished = status.get("currentImage") == image and "rollout" not in status
        return status if finished and status.get("state") == "Active" else NotYet(status)

    return await eventually(done, f"{name} rolled to {image}", timeout, interval=0.5)


async def operator_pods(kube: Client, service: Obj) -> list[Obj]:
    """The Running pods the metrics Service selects."""
    selector = ",".join(f"{key}={value}" for key, value in sorted(service["spec"]["selector"].items()))
    pods = await kube.list(PODS, service["metadata"]["namespace"], label_selector=selector)
    return [
        p
        for p in pods
        if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


async def scraped(kube: Client, server: prom.Prometheus, service: Obj) -> dict[str, Sample]:
    """Wait until every operator pod the Service selects is an up target; pod name -> target."""

    async def all_up() -> dict[str, Sample] | NotYet:
        pods = {p["metadata"]["name"]: p for p in await operator_pods(kube, service)}
        targets = {t["labels"].get("pod"): t for t in await asyncio.to_thread(server.targets)}
        health = {name: (t["health"], t["lastError"]) for name, t in targets.items()}
        up = {name for name, t in targets.items() if t["health"] == "up"}
        return (
            {name: targets[name] for name in pods} if len(pods) == 2 and up >= set(pods) else NotYet(health)
        )

    return await eventually(all_up, "both operator pods scraped", 90, interval=1)


async def windows(server: prom.Prometheus) -> dict[str, float]:
    """Operator pod -> the warning window it exports (seconds)."""
    samples = await query(server, "valkey_operator_tls_expiry_warning_seconds")
    return {s["metric"]["pod"]: float(s["value"][1]) for s in samples}


@pytest.mark.timeout(1200)
async def test_prometheus_scrapes_the_chart_install_and_every_panel_and_alert_has_live_data(
    kube: Client,
    kubeconfig_path: Path,
    namespace: str,
    workloads: str,
    catalog: Catalog,
    tmp_path: Path,
    release: str,
    operator_image: operatorimage.BuiltImage,
) -> None:
    newest = images.valkey_version(images.newest_image())
    for reference in (
        images.tls_image(),
        f"valkey/valkey:{OLD}",
        images.newest_image(),
        "valkey/valkey:9.0.0",
    ):
        require_image(reference)
    started = time.monotonic()
    # By digest: the tag is shared by every checkout's image on this machine.
    values = (f"watchNamespaces={{{workloads}}}", f"image.digest={operator_image.digest}")
    await adopt_crds(kube, namespace)
    took = install(kubeconfig_path, namespace, *values, f"operatorConfig.tlsExpiryWarningDays={WINDOW_DAYS}")
    print(f"helm install --wait: {took:.1f}s")
    rule_file, board = rendered(kubeconfig_path, namespace, *values)
    # The `for` windows are promtool's to check (tests/prometheus/alerts_test.yaml); the node alerts
    # this test provokes get none here, so Prometheus fires them within the test.
    for group in rule_file["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") in PROVOKED:
                rule["for"] = "0s"
    rules_path = tmp_path / "rules.yaml"
    rules_path.write_text(yaml.safe_dump(rule_file))
    service = await kube.get(SERVICES, METRICS_SERVICE, namespace)

    # Clusters: TLS with a 30-day certificate, and one to roll.
    pki_ca, pki_key = certs.issue_ca("prometheus-ca")
    not_after = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=CERT_DAYS)
    cert, key = certs.issue_leaf(
        pki_ca, pki_key, "valkey", ip_addresses=("127.0.0.1",), server=True, client=True, not_after=not_after
    )
    await put_tls_secret(kube, workloads, (certs.pem(cert), certs.key_pem(key)), certs.pem(pki_ca))
    tls_config = await catalog.config(
        "tlscfg", await catalog.image("tlsimg", images.valkey_version(images.tls_image()))
    )
    body = {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": "tls", "namespace": workloads},
        "spec": {"configRef": tls_config, "shards": 1, "replicasPerShard": 1, "tls": {"secretRef": "tls"}},
    }
    await kube.create(VALKEY_CLUSTERS, body)
    old_image = await catalog.image("old", OLD)
    new_image = await catalog.image("new", newest)
    liar = await catalog.image("liar", "9.0.0", version="9.0.1")
    roll_config = await catalog.config("rollcfg", old_image)
    await create_cluster(kube, workloads, "roll", roll_config, shards=1, replicas=1)
    # A store (not a cache: noeviction, 16 MiB maxmemory), filled to its maxmemory, whose replica
    # loses its link: ValkeyMemoryNearMaxmemory and ValkeyReplicaLinkDown.
    await create_cluster(
        kube, workloads, "store", await store_config(catalog, "storecfg", new_image), shards=1, replicas=1
    )

    with running_prometheus(
        service_scrape(service, kubeconfig_path), rules_path, tmp_path / "prometheus"
    ) as server:
        # Both replicas run the operator image under the chart's ServiceAccount, and both are scraped
        # at their pod IP on the port the Service's targetPort names.
        targets = await scraped(kube, server, service)
        pods = {p["metadata"]["name"]: p for p in await operator_pods(kube, service)}
        for name, pod in pods.items():
            assert pod["spec"]["serviceAccountName"] == ACCOUNT
            assert (
                pod["status"]["containerStatuses"][0]["imageID"] == f"valkey-operator@{operator_image.digest}"
            )
            (port,) = [
                p
                for p in pod["spec"]["containers"][0]["ports"]
                if p["name"] == service["spec"]["ports"][0]["targetPort"]
            ]
            assert port["containerPort"] == service["spec"]["ports"][0]["port"]
            url = f"http://{pod['status']['podIP']}:{port['containerPort']}/metrics"
            assert targets[name]["scrapeUrl"] == url, targets[name]
            assert targets[name]["labels"]["namespace"] == namespace

        async def one_leader() -> str | NotYet:
            leaders = {
                s["metric"]["pod"]: float(s["value"][1])
                for s in await query(server, "leader_election_master_status")
            }
            one = set(leaders) == set(pods) and sorted(leaders.values()) == [0, 1]
            return next(pod for pod, value in leaders.items() if value == 1) if one else NotYet(leaders)

        leader = await eventually(one_leader, "one leader among the operator pods", 60, interval=1)
        assert await windows(server) == {name: WINDOW_DAYS * DAY for name in pods}

        await settled(kube, workloads, "tls", 300)
        await settled(kube, workloads, "roll", 300)
        await settled(kube, workloads, "store", 300)
        # The operator's lines about one cluster, read through pods/log as `kubectl valkey logs` reads
        # them from the chart's operator pods.
        plugin = [sys.executable, "-m", "valkey_operator.kubectl", f"--kubeconfig={kubeconfig_path}"]
        logs = await asyncio.to_thread(
            subprocess.run,
            [*plugin, "logs", "tls", "-n", workloads, "--operator-namespace", namespace, "-o", "text"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert logs.returncode == 0 and f"cluster={workloads}/tls" in logs.stdout, logs
        assert f"{workloads}/store" not in logs.stdout, logs.stdout
        store_admin = await admin_client(kube, workloads, "store")
        store_nodes = await roles(kube, workloads, "store")
        ((store_primary, primary_ip),) = [
            (p, ip) for p, (role, ip) in store_nodes.items() if role == "master"
        ]
        ((store_replica, replica_ip),) = [(p, ip) for p, (role, ip) in store_nodes.items() if role == "slave"]
        print(
            f"store primary {store_primary} refused writes after {await fill(store_admin, primary_ip)} keys"
        )
        await break_link(store_admin, replica_ip)
        assert await link_status(store_admin, replica_ip) == "down"
        # A replica out of sync keeps the store from Active (SyncingReplicas). The operator sees it at
        # its next look (30 s to 5 min on a quiet cluster); a nudge makes that now, so the state
        # series and ValkeyClusterNotActive do not depend on when the look falls.
        nudge = {"metadata": {"annotations": {NUDGE_ANNOTATION: str(time.time())}}}
        await kube.patch(VALKEY_CLUSTERS, "store", nudge, workloads)
        await state_of(kube, workloads, "store", "Updating", 60)
        tls_status = await status_of(kube, workloads, "tls")
        degraded = find_condition(tls_status.get("conditions"), "Degraded") or {}
        assert degraded.get("reason") == "CertificateExpiring", degraded  # the operator agrees with the alert

        # A roll that finishes, then one that stops at a binary below the floor.
        await kube.patch(VALKEY_CONFIGS, roll_config, {"spec": {"imageRef": new_image}})
        await rolled(kube, workloads, "roll", f"valkey/valkey:{newest}", 300)
        await kube.patch(VALKEY_CONFIGS, roll_config, {"spec": {"imageRef": liar}})
        # The old pods keep serving, so the roll stops Updating, not Failed (SPEC 1.8); a new
        # cluster of that binary serves nothing: Failed.
        await stopped_roll(kube, workloads, "roll", 180)
        await create_cluster(kube, workloads, "failed", roll_config, shards=1, replicas=0)
        await state_of(kube, workloads, "failed", "Failed", 180)
        print(f"clusters formed, rolled and failed {time.monotonic() - started:.1f}s after the install")

        # Only the leader reports clusters and nodes, under the Valkey pods' labels.
        nodes = await query(server, f'valkey_node_role{{namespace="{workloads}"}} == 1')
        assert {s["metric"]["instance"] for s in nodes} == {targets[leader]["labels"]["instance"]}, nodes
        assert {s["metric"]["pod"] for s in nodes}.isdisjoint(pods)
        # So are redis_exporter's series, read from the nodes on scrape (every Ready node is read).
        read = await query(server, f'redis_up{{namespace="{workloads}"}} == 1')
        assert {s["metric"]["instance"] for s in read} == {targets[leader]["labels"]["instance"]}, read
        assert set(store_nodes) <= {s["metric"]["pod"] for s in read}, read

        # Every dashboard query and every series selector in it has data.
        async def dashboard_populated() -> bool | NotYet:
            found = []
            for where, expr in dashboard_queries(board, workloads):
                found += await gaps(server, where, expr, whole=True)
            return not found or NotYet(found)

        async with load(store_admin, primary_ip) as sent:
            await eventually(dashboard_populated, "every dashboard query populated", 120, interval=2)
        count = len(dashboard_queries(board, workloads))
        print(f"{count} dashboard queries populated ({sent[0]} reads of load)")

        # Every alert's selectors have data, and each expression names exactly what the clusters
        # show: the stopped roll, the Failed cluster, the roll's reported nodes that say
        # cluster_state:fail, both TLS nodes.
        tls_pods = await pod_names(kube, workloads, "tls")
        failing = await failing_nodes(kube, workloads, "roll")
        expected: dict[str, set[Identity]] = {
            "ValkeyOperatorAbsent": set(),
            "ValkeyOperatorNoLeader": set(),
            "ValkeyClusterFailed": {(workloads, "failed")},
            # Stalled: the Failed cluster only (VersionBelowFloor); the stopped roll still serves and
            # is not Stalled (an older binary may yet be put back), nor is the store.
            "ValkeyClusterStalled": {(workloads, "failed")},
            "ValkeyClusterNotActive": {(workloads, "roll"), (workloads, "failed"), (workloads, "store")},
            "ValkeyClusterStateNotOk": {(workloads, "roll", pod) for pod in failing},
            "ValkeyReplicationLagHigh": set(),
            "ValkeySlotMigrationFailed": set(),
            "ValkeyFailoverTimedOut": set(),
            "ValkeyRolloutFailed": {(workloads, "roll")},
            "ValkeyCertificateExpiringSoon": {(workloads, "tls", pod) for pod in tls_pods},
            "ValkeyMemoryNearMaxmemory": set(),  # the store's nodes over 90%: read from them below
            "ValkeyEvictingNotACache": set(),  # noeviction never evicts
            "ValkeyReplicaLinkDown": {(workloads, "store", store_replica)},
            "ValkeyRejectedConnections": set(),
        }
        alerts = alert_rules(rule_file)
        assert set(alerts) == set(expected), "an alert this test has no expectation for"

        async def alerts_as_expected() -> bool | NotYet:
            found = []
            ratios = {pod: await memory_ratio(store_admin, ip) for pod, (_role, ip) in store_nodes.items()}
            expected["ValkeyMemoryNearMaxmemory"] = {
                (workloads, "store", p) for p, r in ratios.items() if r > 0.9
            }
            if (workloads, "store", store_primary) not in expected["ValkeyMemoryNearMaxmemory"]:
                found.append(f"the filled primary is not over 90% of maxmemory: {ratios}")
            for name, expr in alerts.items():
                found += await gaps(server, f"alert {name}", expr, whole=False)
                named = {identity(s["metric"]) for s in await query(server, expr)}
                if named != expected[name]:
                    found.append(f"alert {name}: names {sorted(named)}, expected {sorted(expected[name])}")
            # Prometheus' own evaluation of the chart's rules agrees: each rule evaluated cleanly,
            # and the alerts pending or firing are exactly the expected ones.
            for rule in await asyncio.to_thread(server.rules):
                if rule["health"] != "ok":
                    found.append(f"rule {rule['name']}: health {rule['health']} {rule.get('lastError', '')}")
            raised = await asyncio.to_thread(server.alerts)
            active = {(a["labels"]["alertname"], identity(a["labels"])) for a in raised}
            wanted = {(name, each) for name, identities in expected.items() for each in identities}
            if active != wanted:
                found.append(f"active alerts {sorted(active)}, expected {sorted(wanted)}")
            firing = {
                (a["labels"]["alertname"], identity(a["labels"])) for a in raised if a["state"] == "firing"
            }
            provoked = {(name, each) for name in PROVOKED for each in expected[name]}
            if not provoked <= firing:
                found.append(f"provoked alerts not firing: {sorted(provoked - firing)}")
            return not found or NotYet(found)

        await eventually(alerts_as_expected, "every alert expression as the clusters show", 90, interval=2)

        # ValkeyClusterStalled names the reason the Failed cluster's own Stalled condition carries.
        failed_status = await status_of(kube, workloads, "failed")
        stalled_condition = find_condition(failed_status.get("conditions"), "Stalled") or {}
        stalled_reasons = {
            a["labels"].get("reason")
            for a in await asyncio.to_thread(server.alerts)
            if a["labels"]["alertname"] == "ValkeyClusterStalled"
        }
        assert stalled_condition.get("status") == "True", stalled_condition
        assert stalled_reasons == {stalled_condition.get("reason")} == {"VersionBelowFloor"}, (
            stalled_reasons,
            stalled_condition,
        )

        # A narrower tlsExpiryWarningDays: the upgraded operator exports 7 days, the alert and the
        # cluster's Degraded condition both let the 30-day certificate be.
        took = install(
            kubeconfig_path, namespace, *values, f"operatorConfig.tlsExpiryWarningDays={NARROW_DAYS}",
            command="upgrade",
        )  # fmt: skip
        print(f"helm upgrade --wait (tlsExpiryWarningDays {NARROW_DAYS}): {took:.1f}s")
        expiring = alerts["ValkeyCertificateExpiringSoon"]

        async def narrowed() -> bool | NotYet:
            current = await scraped(kube, server, service)
            instances = {t["labels"]["instance"] for t in current.values()}
            reported = await query(
                server, f'valkey_node_tls_certificate_expiry_seconds{{namespace="{workloads}"}}'
            )
            exported = await windows(server)
            reporters = {s["metric"]["instance"] for s in reported}
            named = [identity(s["metric"]) for s in await query(server, expiring)]
            raised = [
                a["labels"]
                for a in await asyncio.to_thread(server.alerts)
                if a["labels"]["alertname"] == "ValkeyCertificateExpiringSoon"
            ]
            status = await status_of(kube, workloads, "tls")
            degraded = find_condition(status.get("conditions"), "Degraded") or {}
            done = (
                exported == {name: NARROW_DAYS * DAY for name in current}
                and len(reported) == 2
                and reporters <= instances
                and named == []
                and raised == []
                and degraded.get("reason") != "CertificateExpiring"
            )
            seen = (exported, reporters, named, raised, degraded)
            return done or NotYet(seen)

        await eventually(narrowed, f"the certificate outside a {NARROW_DAYS}-day window", 120, interval=2)

        # A leader handover: the new leader exports every node's redis_* series, under its own
        # instance, once it has reconciled the cluster and been scraped.
        async def leading_instance() -> tuple[str, str] | NotYet:
            current = await scraped(kube, server, service)
            leading = await query(server, "leader_election_master_status == 1")
            names = [s["metric"]["pod"] for s in leading if s["metric"]["pod"] in current]
            if len(names) != 1:
                return NotYet(leading)
            return names[0], current[names[0]]["labels"]["instance"]

        old_leader, old_instance = await eventually(leading_instance, "one current leader", 60, interval=1)
        handover = time.monotonic()
        await kube.delete(PODS, old_leader, namespace)

        async def new_leader_exports() -> set[str] | NotYet:
            read = await query(
                server,
                f'redis_up{{namespace="{workloads}", cluster="store", instance!="{old_instance}"}} == 1',
            )
            pods_read = {s["metric"]["pod"] for s in read}
            return pods_read if pods_read >= set(store_nodes) else NotYet(pods_read)

        await eventually(new_leader_exports, "the new leader's redis_* series", 180, interval=0.5)
        print(f"leader {old_leader} deleted: the new leader's redis_* series in Prometheus after "
              f"{time.monotonic() - handover:.1f}s")  # fmt: skip
        print(f"test body {time.monotonic() - started:.1f}s")


def rendered_service_monitor_endpoint(kubeconfig: Path, operator: ChartOperator) -> Obj:
    """The one endpoint of the ServiceMonitor the chart renders for this release's values (the test
    bed runs no Prometheus Operator to read it, so the test does what that operator would)."""
    text = helm(
        kubeconfig, "template", operator.release, str(CHART), "-n", operator.namespace,
        "--kube-version", kubeversion.selected().kubernetes,
        *set_flags((*operator.chart_values(), "metrics.serviceMonitor.enabled=true")),
    )  # fmt: skip
    (monitor,) = [doc for doc in yaml.safe_load_all(text) if doc and doc["kind"] == "ServiceMonitor"]
    (endpoint,) = monitor["spec"]["endpoints"]
    return dict(endpoint)


def endpoint_scrape(endpoint: Obj, service: Obj, kubeconfig: Path, token_file: Path) -> prom.PodScrape:
    """A ServiceMonitor endpoint as Prometheus Operator writes it into the scrape configuration: its
    scheme, its tlsConfig, and its bearerTokenFile, which is the path of Prometheus' own projected
    ServiceAccount token in its pod; here Prometheus runs on the host, so that token (from a
    TokenRequest, as the kubelet gets it) is in token_file."""
    assert endpoint["port"] == service["spec"]["ports"][0]["name"], (endpoint, service["spec"])
    pod_scrape = service_scrape(service, kubeconfig)
    tls = endpoint.get("tlsConfig") or {}
    assert set(tls) <= {"insecureSkipVerify"}, f"a tlsConfig field this test does not translate: {tls}"
    return attrs.evolve(
        pod_scrape,
        scheme=endpoint.get("scheme", "http"),
        insecure_skip_verify=bool(tls.get("insecureSkipVerify")),
        bearer_token_file=token_file if endpoint.get("bearerTokenFile") == PROJECTED_TOKEN else None,
    )


async def metrics_status(url: str, token: str | None) -> int:
    """The status of a GET of the operator's /metrics, certificate unchecked (it is self-signed)."""
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = aiohttp.ClientTimeout(total=10)
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=insecure)) as session,
        session.get(url, headers=headers, timeout=timeout) as response,
    ):
        await response.read()
        return response.status


@pytest.mark.operator_values("metrics.secure=true")
async def test_prometheus_scrapes_secure_metrics_with_its_own_service_account_token(
    kube: Client, kubeconfig_path: Path, namespace: str, operator: ChartOperator | Operator, tmp_path: Path
) -> None:
    """metrics.secure as users meet it: the operator pod from the chart serves /metrics over HTTPS to
    Prometheus' ServiceAccount, bound to the chart's <fullname>-metrics-reader, scraping as the
    chart's ServiceMonitor says; no token 401, another ServiceAccount's token 403, plain HTTP refused."""
    assert isinstance(operator, ChartOperator)
    started = time.monotonic()
    fullname = operator.deployment
    endpoint = rendered_service_monitor_endpoint(kubeconfig_path, operator)
    assert endpoint.get("scheme") == "https" and endpoint.get("bearerTokenFile") == PROJECTED_TOKEN, endpoint

    # Prometheus' own ServiceAccount, bound to the reader role the chart rendered; its token from a
    # TokenRequest, where the ServiceMonitor's bearerTokenFile has Prometheus read it.
    for account in ("prometheus", "stranger"):
        await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": account, "namespace": namespace}})
    binding = f"{namespace}-prometheus-metrics"
    reader = {"apiGroup": RBAC, "kind": "ClusterRole", "name": f"{fullname}-metrics-reader"}
    subject = {"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}
    await kube.create(
        CLUSTER_ROLE_BINDINGS, {"metadata": {"name": binding}, "roleRef": reader, "subjects": [subject]}
    )
    try:
        token_file = tmp_path / "prometheus-token"
        token_file.write_text(await service_account_token(kube, namespace, "prometheus"))
        token_file.chmod(0o600)
        stranger = await service_account_token(kube, namespace, "stranger")

        service = await kube.get(SERVICES, f"{fullname}-metrics", namespace)
        scrape = endpoint_scrape(endpoint, service, kubeconfig_path, token_file)
        server = prom.start([scrape], directory=tmp_path / "prometheus")
        try:
            await asyncio.to_thread(server.wait_ready)

            async def scraped() -> list[Sample] | NotYet:
                targets = await asyncio.to_thread(server.targets)
                health = [(t["scrapeUrl"], t["health"], t["lastError"]) for t in targets]
                if not any(t["health"] == "up" for t in targets):
                    return NotYet(health)
                series = await query(
                    server, f'controller_runtime_max_concurrent_reconciles{{pod="{operator.pod_name}"}}'
                )
                return series or NotYet({"targets": health, "series": "none yet"})

            series = await eventually(scraped, "Prometheus scraping the secure /metrics", 60, interval=0.5)
            (target,) = await asyncio.to_thread(server.targets)
            assert target["scrapeUrl"] == f"https://{operator.pod_ip}:{METRICS_PORT}/metrics", target
            print(f"secure scrape up, {len(series)} controller series, {time.monotonic() - started:.1f}s")
        finally:
            server.stop()

        url = f"https://{operator.pod_ip}:{METRICS_PORT}/metrics"
        assert await metrics_status(url, None) == 401
        assert await metrics_status(url, stranger) == 403
        assert await metrics_status(url, token_file.read_text()) == 200
        with pytest.raises(aiohttp.ClientError):
            await metrics_status(f"http://{operator.pod_ip}:{METRICS_PORT}/metrics", None)
    finally:
        await kube.delete(CLUSTER_ROLE_BINDINGS, binding)
    print(f"secure metrics proven in {time.monotonic() - started:.1f}s after the operator led")
