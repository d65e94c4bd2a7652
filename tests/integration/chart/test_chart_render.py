"""The chart as helm renders it, without a server: lint, the packaged chart's CRDs, RBAC without
wildcards, the restricted pod profile, the listener flags through the operator's own parser for an
IPv4 and an IPv6 pod IP, the `helm test` hook, NOTES that paste into a shell, and values refused by
values.schema.json or by the templates."""

from __future__ import annotations

import ipaddress
import itertools
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_render import CHART, helm, render

from valkey_operator import settings
from valkey_operator.core.manager import parse_bind_address
from valkey_testbed.crds import load_manifests, product_crds
from valkey_testbed.kubelet.envvars import container_env, expand
from valkey_testbed.versions import KUBERNETES

ROOT = Path(__file__).resolve().parents[3]
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))
CLIENT_SIDE_APPLY_LIMIT = 262144
"""Bytes of the last-applied annotation kubectl's client-side apply writes (CNPG's CRDs broke it)."""


def refusal(*values: str) -> str:
    done = helm("template", "vo", str(CHART), "--kube-version", KUBERNETES, *values, check=False)
    assert done.returncode != 0, "helm template accepted the values"
    return done.stderr


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def hooks(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"]


def operator_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = of_kind(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=lambda p: p.name if p else "no-values")
def test_lint_strict_is_clean_with_defaults_and_every_ci_value_set(values: Path | None) -> None:
    done = helm("lint", "--strict", str(CHART), *(("-f", str(values)) if values else ()))
    assert "0 chart(s) failed" in done.stdout
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout
    assert render(*(("-f", str(values)) if values else ()))


def test_the_packaged_chart_renders_every_crd_with_the_keep_policy_and_small_enough(tmp_path: Path) -> None:
    """The chart directory alone, copied out of the repository as it is (links kept as links, as a
    vendored copy or an archive of the folder keeps them), packaged, then rendered from the .tgz."""
    shutil.copytree(CHART, tmp_path / "copy" / "valkey-operator", symlinks=True)
    helm("package", str(tmp_path / "copy" / "valkey-operator"), "-d", str(tmp_path))
    (package,) = tmp_path.glob("valkey-operator-*.tgz")
    rendered = {
        crd["metadata"]["name"]: crd for crd in of_kind(render(chart=package), "CustomResourceDefinition")
    }
    for source in load_manifests(product_crds()):
        crd = rendered.pop(source["metadata"]["name"])
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert {**crd, "metadata": None} == {**source, "metadata": None}
        assert len(json.dumps(crd)) < CLIENT_SIDE_APPLY_LIMIT // 2
    assert rendered == {}


def test_crds_enabled_false_renders_no_crd_and_everything_else() -> None:
    """A platform that installs CRDs apart (or a second release beside the one that owns them) gets
    the operator, its RBAC and its ConfigMap, and not one CRD: Helm would otherwise fight the other
    owner for them."""
    with_crds, without = render(), render("--set", "crds.enabled=false")
    assert len(of_kind(with_crds, "CustomResourceDefinition")) == len(product_crds())
    assert of_kind(without, "CustomResourceDefinition") == []
    others = [doc for doc in with_crds if doc["kind"] != "CustomResourceDefinition"]
    assert without == others


def test_crds_keep_false_lets_helm_delete_them_with_the_release() -> None:
    def policies(*values: str) -> set[str | None]:
        crds = of_kind(render(*values), "CustomResourceDefinition")
        return {crd["metadata"].get("annotations", {}).get("helm.sh/resource-policy") for crd in crds}

    assert policies() == {"keep"}
    assert policies("--set", "crds.keep=false") == {None}


def test_aggregated_roles_give_tenants_their_kinds_and_never_the_platform_kinds() -> None:
    docs = render()
    roles = {r["metadata"]["name"]: r for r in of_kind(docs, "ClusterRole")}
    view, edit = roles["vo-valkey-operator-view"], roles["vo-valkey-operator-edit"]
    aggregation = "rbac.authorization.k8s.io/aggregate-to-"
    assert {
        k for k, v in view["metadata"]["labels"].items() if k.startswith(aggregation) and v == "true"
    } == {f"{aggregation}{role}" for role in ("view", "edit", "admin")}
    assert {
        k for k, v in edit["metadata"]["labels"].items() if k.startswith(aggregation) and v == "true"
    } == {f"{aggregation}{role}" for role in ("edit", "admin")}
    assert {verb for rule in view["rules"] for verb in rule["verbs"]} == {"get", "list", "watch"}
    assert {resource for rule in edit["rules"] for resource in rule["resources"]} == {
        "valkeyclusters",
        "valkeybackups",
    }
    assert "vo-valkey-operator-view" not in {
        r["metadata"]["name"]
        for r in of_kind(render("--set", "aggregatedRoles.enabled=false"), "ClusterRole")
    }


def test_the_admission_policy_binds_to_the_operators_serviceaccount_only() -> None:
    docs = render("--set", "serviceAccount.name=valkey-op")
    (policy,) = of_kind(docs, "ValidatingAdmissionPolicy")
    (binding,) = of_kind(docs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"] == 'request.userInfo.username == "system:serviceaccount:ops:valkey-op"'
    without = render("--set", "admissionPolicy.enabled=false")
    assert not of_kind(without, "ValidatingAdmissionPolicy") and not of_kind(
        without, "ValidatingAdmissionPolicyBinding"
    )


def test_secure_metrics_wire_the_flag_the_reviews_the_reader_role_and_the_monitor() -> None:
    docs = render(*("--set", "metrics.secure=true", "--set", "metrics.serviceMonitor.enabled=true"))
    assert "--metrics-secure" in operator_container(docs)["args"]
    roles = {r["metadata"]["name"]: r["rules"] for r in of_kind(docs, "ClusterRole")}
    reviews = {(rule["resources"][0], tuple(rule["verbs"])) for rule in roles["vo-valkey-operator"]}
    assert {("tokenreviews", ("create",)), ("subjectaccessreviews", ("create",))} <= reviews
    assert roles["vo-valkey-operator-metrics-reader"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    (monitor,) = of_kind(docs, "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https" and endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    plain = render()
    assert "--metrics-secure" not in operator_container(plain)["args"]
    assert "vo-valkey-operator-metrics-reader" not in {
        r["metadata"]["name"] for r in of_kind(plain, "ClusterRole")
    }


@pytest.mark.parametrize("kube_version", ["v1.38.0", "v1.40.2", None], ids=["1.38", "1.40", "helm-default"])
def test_the_packaged_chart_renders_for_newer_minors_than_tested(
    tmp_path: Path, kube_version: str | None
) -> None:
    """No upper bound on kubeVersion: the day a user's cluster moves past the minors we tested,
    `helm upgrade` and GitOps syncs still render (`<1.38.0-0` refused all of these)."""
    helm("package", str(CHART), "-d", str(tmp_path))
    (package,) = tmp_path.glob("valkey-operator-*.tgz")
    pinned = ("--kube-version", kube_version) if kube_version else ()
    text = helm("template", "vo", str(package), "-n", "ops", *pinned).stdout
    kinds = {doc["kind"] for doc in yaml.safe_load_all(text) if doc}
    assert {"Deployment", "CustomResourceDefinition", "ServiceAccount"} <= kinds


def test_the_chart_still_refuses_a_minor_older_than_tested(tmp_path: Path) -> None:
    done = helm("template", "vo", str(CHART), "--kube-version", "v1.33.9", check=False)
    assert done.returncode != 0 and "kubeVersion" in done.stderr, done.stderr


@pytest.mark.parametrize(
    "values",
    [(), ("--set", "watchNamespaces={a,b}"), ("--set", "metrics.secure=true")],
    ids=["cluster-wide", "namespaced", "secure-metrics"],
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
        assert not {"pods/exec", "pods/attach", "pods/portforward", "secrets/*"} & set(
            rule.get("resources", [])
        )
        assert "escalate" not in rule["verbs"] and "bind" not in rule["verbs"]
    if "watchNamespaces={a,b}" in values:
        bound = {
            (b["kind"], b["metadata"].get("namespace"), b["roleRef"]["name"]) for b in docs if "roleRef" in b
        }
        assert ("ClusterRoleBinding", None, "vo-valkey-operator-workloads") not in bound
        assert {("RoleBinding", ns, "vo-valkey-operator-workloads") for ns in "ab"} <= bound


def test_the_pod_is_restricted_without_a_fixed_uid_and_spread_over_nodes() -> None:
    docs = render()
    (deployment,) = of_kind(docs, "Deployment")
    template = deployment["spec"]["template"]
    pod = template["spec"]
    container = operator_container(docs)
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert deployment["spec"]["replicas"] == 2 and "--leader-elect" in container["args"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert pod["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector},
        }
    ]
    labels = template["metadata"]["labels"]
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert labels["app.kubernetes.io/version"] == app_version
    assert labels["app.kubernetes.io/component"] == "operator"
    assert selector.items() <= labels.items()


def test_backup_endpoints_on_loopback_or_link_local_are_refused_unless_a_value_allows_them() -> None:
    """The default renders no allowance (the operator refuses such endpoints); the value renders the
    flag, which the operator parses; a value that is not CIDRs is refused by the schema."""
    flag = "--backup-endpoint-allowed-networks="
    default = operator_container(render())["args"]
    assert not [arg for arg in default if arg.startswith(flag)]
    allowed = operator_container(render("--set", "backupEndpointAllowedNetworks=127.0.0.0/8"))["args"]
    (arg,) = [arg for arg in allowed if arg.startswith(flag)]
    parsed = settings.parse([arg], {}, Path("/nonexistent")).backup_endpoint_allowed_networks
    assert parsed == (ipaddress.ip_network("127.0.0.0/8"),)
    assert "backupEndpointAllowedNetworks" in refusal("--set", "backupEndpointAllowedNetworks=localhost")


def test_the_default_node_networks_are_the_private_ranges() -> None:
    (flag,) = [arg for arg in operator_container(render())["args"] if arg.startswith("--node-networks=")]
    networks = settings.parse([flag], {}, Path("/nonexistent")).node_networks

    def covered(cidr: str) -> bool:
        net = ipaddress.ip_network(cidr)
        return any(n.version == net.version and net.subnet_of(n) for n in networks)  # type: ignore[arg-type]

    def touched(cidr: str) -> bool:
        net = ipaddress.ip_network(cidr)
        return any(n.version == net.version and net.overlaps(n) for n in networks)

    # kubeadm/flannel, Calico, k3s, EKS custom networking, kind's IPv6 pod CIDR.
    pod_networks = ("10.244.0.0/16", "192.168.0.0/16", "10.42.0.0/16", "100.64.0.0/16", "fd00:10:244::/56")
    for pod_network in pod_networks:
        assert covered(pod_network), pod_network
    # Cloud metadata, the internet, global IPv6: never dialled by default.
    for never in ("169.254.169.254/32", "8.8.8.8/32", "2001:db8::1/128"):
        assert not touched(never), never


@pytest.mark.parametrize("pod_ip", ["10.244.1.7", "fd00:10:244::7"], ids=["ipv4", "ipv6"])
def test_the_listener_flags_parse_for_an_ipv4_and_an_ipv6_pod_ip(pod_ip: str) -> None:
    """$(POD_IP) expanded as the test bed's kubelet expands it, then the operator's own parser."""
    docs = render("--set", "metrics.port=9090", "--set", "healthProbePort=9091")
    (deployment,) = of_kind(docs, "Deployment")
    pod = {**deployment["spec"]["template"], "metadata": {"name": "vo-abc", "namespace": "ops"}}
    container = operator_container(docs)
    env = container_env(
        pod, container, pod_ip=pod_ip, host_ip="10.0.0.1", base={},
        configmaps=lambda _ns, _name: None, secrets=lambda _ns, _name: None, node_allocatable={},
    )  # fmt: skip
    argv = [expand(arg, env) for arg in container["args"]]
    parsed = settings.parse(argv, env, Path("/nonexistent"))
    assert parse_bind_address(parsed.metrics_bind_address) == (pod_ip, 9090)
    assert parse_bind_address(parsed.health_probe_bind_address) == (pod_ip, 9091)
    assert parsed.leader_election_namespace == "ops"
    # Clusters' NetworkPolicies admit the operator by these: they must be on the operator's pods.
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert parsed.operator_namespace == "ops" and parsed.operator_pod_labels
    assert all(labels.get(key) == value for key, value in parsed.operator_pod_labels), labels


def test_new_values_reach_the_objects() -> None:
    digest = "sha256:" + "ab" * 32
    docs = render(
        *("--set", "fullnameOverride=vk", "--set", "commonLabels.team=platform"),
        *("--set", "image.repository=registry.example/vo", "--set", f"image.digest={digest}"),
        *("--set", "extraArgs={--cluster-workers=9}", "--set", "extraEnv[0].name=TZ"),
        *("--set", "extraEnv[0].value=UTC", "--set", "podSecurityContext.runAsUser=1000"),
        *("--set", "podDisruptionBudget.enabled=true", "--set", "podDisruptionBudget.maxUnavailable=1"),
        *("--set", "extraVolumes[0].name=ca", "--set", "extraVolumes[0].secret.secretName=backup-ca"),
        *("--set", "extraVolumeMounts[0].name=ca", "--set", "extraVolumeMounts[0].mountPath=/etc/backup-ca"),
    )
    for doc in docs:
        assert doc["metadata"]["labels"]["team"] == "platform", (doc["kind"], doc["metadata"]["name"])
        if doc["kind"] not in ("CustomResourceDefinition", "ConfigMap"):
            assert doc["metadata"]["name"].startswith("vk"), doc["metadata"]["name"]
    container = operator_container(docs)
    assert container["image"] == f"registry.example/vo@{digest}"
    assert container["args"][-1] == "--cluster-workers=9"  # after the chart's own: it wins
    assert {"name": "TZ", "value": "UTC"} in container["env"]
    (deployment,) = of_kind(docs, "Deployment")
    assert deployment["spec"]["template"]["metadata"]["labels"]["team"] == "platform"
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 1000
    assert deployment["spec"]["template"]["spec"]["volumes"] == [
        {"name": "ca", "secret": {"secretName": "backup-ca"}}
    ]
    assert container["volumeMounts"] == [{"name": "ca", "mountPath": "/etc/backup-ca"}]
    (budget,) = of_kind(docs, "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 1 and "minAvailable" not in budget["spec"]
    named = render("--set", "nameOverride=vko")
    (deployment,) = of_kind(named, "Deployment")
    assert deployment["metadata"]["name"] == "vo-vko"
    assert deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "vko"


def test_optional_objects_render_when_enabled() -> None:
    docs = render(
        *("--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.podMonitor.enabled=true"),
        *("--set", "podDisruptionBudget.enabled=true", "--set", "prometheusRule.enabled=true"),
        *("--set", "dashboard.enabled=true", "--set", "metrics.exporter.podMonitor.enabled=true"),
        *(
            "--set",
            "metrics.serviceMonitor.scrapeTimeout=10s",
            "--set",
            "metrics.podMonitor.scrapeTimeout=5s",
        ),
        *("--set", "metrics.serviceMonitor.relabelings[0].targetLabel=team"),
        *("--set", "metrics.serviceMonitor.relabelings[0].replacement=platform"),
        *("--set", "metrics.podMonitor.metricRelabelings[0].action=drop"),
        *("--set", "metrics.podMonitor.metricRelabelings[0].regex=go_.*"),
        *("--set", "metrics.exporter.podMonitor.relabelings[0].targetLabel=team"),
    )
    kinds = {doc["kind"] for doc in docs}
    assert {"ServiceMonitor", "PodMonitor", "PodDisruptionBudget", "PrometheusRule"} <= kinds
    (budget,) = of_kind(docs, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1 and "maxUnavailable" not in budget["spec"]
    (rule,) = of_kind(docs, "PrometheusRule")
    assert rule["spec"]["groups"]
    dashboards = [c for c in of_kind(docs, "ConfigMap") if c["metadata"]["name"].endswith("-dashboard")]
    assert json.loads(dashboards[0]["data"]["valkey-operator.json"])["panels"]
    (monitor,) = of_kind(docs, "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scrapeTimeout"] == "10s" and endpoint["relabelings"] == [
        {"targetLabel": "team", "replacement": "platform"}
    ]
    monitors = {
        m["metadata"]["name"]: m["spec"]["podMetricsEndpoints"][0] for m in of_kind(docs, "PodMonitor")
    }
    operator, exporter = monitors["vo-valkey-operator"], monitors["vo-valkey-operator-valkey-exporter"]
    assert operator["scrapeTimeout"] == "5s" and operator["metricRelabelings"] == [
        {"action": "drop", "regex": "go_.*"}
    ]
    assert [r.get("targetLabel") for r in exporter["relabelings"]] == ["cluster", "team"]  # the chart's first
    assert "scrapeTimeout" not in exporter


def runbook_urls(docs: list[dict[str, Any]]) -> list[str]:
    (rule,) = of_kind(docs, "PrometheusRule")
    return [r["annotations"]["runbook_url"] for g in rule["spec"]["groups"] for r in g["rules"]]


def test_runbook_links_are_the_repository_path_or_under_the_configured_base() -> None:
    """No made-up host: by default each runbook_url is the repository path of the alert's section
    (a file that exists); prometheusRule.runbookBaseURL is put before it, with or without a slash."""
    plain = runbook_urls(render("--set", "prometheusRule.enabled=true"))
    assert len(plain) >= 9
    for url in plain:
        path, _, anchor = url.partition("#")
        assert path == "docs/troubleshooting.md" and anchor and (ROOT / path).is_file(), url
    for base in ("https://docs.example.test/vo/blob/v1", "https://docs.example.test/vo/blob/v1/"):
        rendered = runbook_urls(
            render("--set", "prometheusRule.enabled=true", "--set", f"prometheusRule.runbookBaseURL={base}")
        )
        assert rendered == ["https://docs.example.test/vo/blob/v1/" + url for url in plain]
    assert "runbookBaseURL" in refusal("--set", "prometheusRule.runbookBaseURL=docs.example.test")


def test_the_test_hook_runs_the_operator_image_with_least_privilege() -> None:
    docs = render()
    tests = hooks(docs)
    assert {d["kind"] for d in tests} == {
        "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Pod",
    }  # fmt: skip
    for doc in tests:
        policy = doc["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
        assert policy == "before-hook-creation,hook-succeeded"
    (pod,) = of_kind(tests, "Pod")
    (account,) = of_kind(tests, "ServiceAccount")
    assert pod["spec"]["serviceAccountName"] == account["metadata"]["name"]
    assert pod["spec"]["restartPolicy"] == "Never"
    (container,) = pod["spec"]["containers"]
    operator = operator_container(docs)
    assert container["image"] == operator["image"]
    assert container["securityContext"] == operator["securityContext"]
    crd_names = sorted(crd["metadata"]["name"] for crd in load_manifests(product_crds()))
    assert container["args"] == [
        "selftest",
        "--namespace=ops",
        "--selector=app.kubernetes.io/instance=vo,app.kubernetes.io/name=valkey-operator",
        "--port=8081",
        f"--crds={','.join(crd_names)}",
    ]
    assert settings.parser().prog == "valkey-operator"  # the image's entrypoint takes the subcommand
    (role,) = of_kind(tests, "Role")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    (cluster_role,) = of_kind(tests, "ClusterRole")
    assert cluster_role["rules"] == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "resourceNames": crd_names,
            "verbs": ["get"],
        }
    ]
    # The operator's ReplicaSet, Service and PodDisruptionBudget must never select the test pod.
    (deployment,) = of_kind(docs, "Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert not selector.items() <= pod["metadata"]["labels"].items()
    assert hooks(render("--set", "tests.enabled=false")) == []


def rendered_notes(tmp_path: Path, *values: str) -> str:
    """NOTES.txt as helm renders it: helm template never prints NOTES and `helm install --dry-run`
    needs a server, so a copy of the chart renders NOTES.txt into a ConfigMap by name."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    (chart / "templates" / "zz-notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
        'data:\n  notes: {{ include (print $.Template.BasePath "/NOTES.txt") . | toJson }}\n'
    )
    docs = render(*values, chart=chart)
    (notes,) = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == "notes"]
    text: str = notes["data"]["notes"]
    return text


@pytest.mark.parametrize(
    "values", [(), ("--set", "watchNamespaces={a,b}", "--set", "metrics.serviceMonitor.enabled=true")]
)
def test_the_notes_commands_paste_into_a_shell(tmp_path: Path, values: tuple[str, ...]) -> None:
    notes = rendered_notes(tmp_path, *values)
    # A block: consecutive indented lines, pasted as they are shown (indentation included).
    blocks = [block for block in re.split(r"\n(?! {5})[^\n]*", "\n" + notes) if block.strip()]
    for block in blocks:
        done = subprocess.run(["bash", "-n"], input=block + "\n", capture_output=True, text=True)
        assert done.returncode == 0 and done.stderr == "", (block, done.stderr)
    commands = [line.strip() for block in blocks for line in block.splitlines() if line.strip()]
    for command in commands:
        words = shlex.split(command)
        assert words[0] in ("kubectl", "helm"), command
        for flag, value in itertools.pairwise(words):
            if flag == "-f":
                assert (ROOT / value).is_file(), command  # run from the repository's checkout
            if flag == "--overrides":
                assert json.loads(value)["spec"]["containers"], command
    applied = [shlex.split(command)[-1] for command in commands if command.startswith("kubectl apply -f ")]
    assert applied == ["docs/examples/curated.yaml", "docs/examples/cluster.yaml"], notes
    assert any(command.startswith("helm test vo -n ops") for command in commands), notes
    assert "10.0.0.0/8" in notes  # the networks the operator dials


DOCUMENTED_COMMA_FORMS = {
    "--set-json 'nodeNetworks=\"10.244.0.0/16,fd00:10:244::/56\"'": "10.244.0.0/16,fd00:10:244::/56",
    "--set 'nodeNetworks=10.244.0.0/16\\,fd00:10:244::/56'": "10.244.0.0/16,fd00:10:244::/56",
}


@pytest.mark.parametrize("form", DOCUMENTED_COMMA_FORMS)
def test_the_documented_forms_for_a_comma_list_work(form: str) -> None:
    for doc in ("docs/install.md", "charts/valkey-operator/README.md"):
        assert form in (ROOT / doc).read_text(), (doc, form)
    args = operator_container(render(*shlex.split(form)))["args"]
    assert f"--node-networks={DOCUMENTED_COMMA_FORMS[form]}" in args
    # What the docs warn about: plain --set and --set-string split the list and fail.
    for flag in ("--set", "--set-string"):
        assert "has no value" in refusal(flag, f"nodeNetworks={DOCUMENTED_COMMA_FORMS[form]}")


def test_the_documented_values_file_form_works(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "install.md").read_text()
    (block,) = re.findall(r"```yaml\n(# values\.yaml\n.*?)```", text, re.DOTALL)
    path = tmp_path / "values.yaml"
    path.write_text(block)
    args = operator_container(render("-f", str(path)))["args"]
    assert f"--node-networks={yaml.safe_load(block)['nodeNetworks']}" in args


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (("--set", "nodeNetworks="), "nodeNetworks"),
        (("--set", "replicas=2"), "replicas"),
        (("--set", "metrics.serviceMonitor.intervall=30s"), "intervall"),
        (("--set", "workers.cluster=0"), "workers"),
        (("--set", "watchNamespaces={Team_A}"), "watchNamespaces"),
        (("--set", "operatorConfig.defaultZoneSpread=sometimes"), "defaultZoneSpread"),
        (("--set", "image.digest=latest"), "digest"),
        (("--set", "extraArgs={leader-elect}"), "extraArgs"),
        (("--set", "topologySpreadConstraints[0].maxSkew=0"), "maxSkew"),
        (("--set", "metrics.port=8081"), "metrics.port and healthProbePort are both 8081"),
        (("--set", "healthProbePort=8080"), "metrics.port and healthProbePort are both 8080"),
        (("--set", "leaderElection.enabled=false"), "replicaCount 2 needs leaderElection.enabled=true"),
        (
            ("--set", "podDisruptionBudget.enabled=true", "--set", "podDisruptionBudget.maxUnavailable=1",
             "--set", "podDisruptionBudget.minAvailable=1"),
            "set minAvailable or maxUnavailable, not both",
        ),
        (
            ("--set", "metrics.secure=true", "--set", "metrics.podMonitor.enabled=true"),
            "metrics.secure needs metrics.serviceMonitor",
        ),
    ],
)  # fmt: skip
def test_values_that_break_at_run_time_are_refused(values: tuple[str, ...], message: str) -> None:
    stderr = refusal(*values)
    assert message in stderr, stderr


def test_one_replica_without_leader_election_is_allowed() -> None:
    docs = render("--set", "replicaCount=1", "--set", "leaderElection.enabled=false")
    args = operator_container(docs)["args"]
    assert "--leader-elect" not in args
