"""The chart as helm renders it, without a server: lint, CRDs, RBAC without wildcards, the restricted
pod profile, and values refused by values.schema.json."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from valkey_operator.testing.build import binaries
from valkey_operator.testing.crds import load_manifests, product_crds
from valkey_operator.testing.versions import KUBERNETES

CHART = Path(__file__).resolve().parents[3] / "charts" / "valkey-operator"
REQUIRED = ("--set", "nodeNetworks=10.0.0.0/8")
CLIENT_SIDE_APPLY_LIMIT = 262144
"""Bytes of the last-applied annotation kubectl's client-side apply writes (CNPG's CRDs broke it)."""


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(binaries().helm), *args], capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def render(*values: str) -> list[dict[str, Any]]:
    text = helm(
        "template", "vo", str(CHART), "-n", "ops", "--kube-version", KUBERNETES, *REQUIRED, *values
    ).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def test_lint_strict_is_clean() -> None:
    done = helm("lint", "--strict", str(CHART), *REQUIRED)
    assert "0 chart(s) failed" in done.stdout
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout


def test_crds_are_the_products_with_the_keep_policy_and_small_enough() -> None:
    rendered = {crd["metadata"]["name"]: crd for crd in of_kind(render(), "CustomResourceDefinition")}
    for source in load_manifests(product_crds()):
        crd = rendered.pop(source["metadata"]["name"])
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert {**crd, "metadata": None} == {**source, "metadata": None}
        assert len(json.dumps(crd)) < CLIENT_SIDE_APPLY_LIMIT // 2
    assert rendered == {}


@pytest.mark.parametrize(
    "values", [(), ("--set", "watchNamespaces={a,b}")], ids=["cluster-wide", "namespaced"]
)
def test_rbac_has_no_wildcards_and_never_exec(values: tuple[str, ...]) -> None:
    docs = render(*values)
    rules = [
        rule for kind in ("ClusterRole", "Role") for role in of_kind(docs, kind) for rule in role["rules"]
    ]
    assert rules
    for rule in rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule.get(field, []), rule
        assert not {"pods/exec", "pods/attach", "pods/portforward", "secrets/*"} & set(rule["resources"])
        assert "escalate" not in rule["verbs"] and "bind" not in rule["verbs"]
    if values:
        bound = {
            (b["kind"], b["metadata"].get("namespace"), b["roleRef"]["name"]) for b in docs if "roleRef" in b
        }
        assert ("ClusterRoleBinding", None, "vo-valkey-operator-workloads") not in bound
        assert {("RoleBinding", ns, "vo-valkey-operator-workloads") for ns in "ab"} <= bound


def test_the_pod_is_restricted_and_listens_on_its_own_ip() -> None:
    (deployment,) = of_kind(render(), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert "--metrics-bind-address=$(POD_IP):8080" in container["args"]
    assert "--node-networks=10.0.0.0/8" in container["args"]
    assert deployment["spec"]["replicas"] == 2 and "--leader-elect" in container["args"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_optional_objects_render_when_enabled() -> None:
    docs = render(
        *("--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.podMonitor.enabled=true"),
        *("--set", "podDisruptionBudget.enabled=true", "--set", "prometheusRule.enabled=true"),
        *("--set", "dashboard.enabled=true"),
    )
    kinds = {doc["kind"] for doc in docs}
    assert {"ServiceMonitor", "PodMonitor", "PodDisruptionBudget", "PrometheusRule"} <= kinds
    (rule,) = of_kind(docs, "PrometheusRule")
    assert rule["spec"]["groups"]
    dashboards = [c for c in of_kind(docs, "ConfigMap") if c["metadata"]["name"].endswith("-dashboard")]
    assert json.loads(dashboards[0]["data"]["valkey-operator.json"])["panels"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (("--set", "nodeNetworks="), "nodeNetworks"),
        (("--set", "replicas=2"), "replicas"),
        (("--set", "metrics.serviceMonitor.intervall=30s"), "intervall"),
        (("--set", "workers.cluster=0"), "workers"),
        (("--set", "watchNamespaces={Team_A}"), "watchNamespaces"),
        (("--set", "operatorConfig.defaultZoneSpread=sometimes"), "defaultZoneSpread"),
    ],
)
def test_bad_values_are_refused_by_the_schema(values: tuple[str, ...], message: str) -> None:
    done = helm("template", "vo", str(CHART), "--kube-version", KUBERNETES, *REQUIRED, *values, check=False)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr
