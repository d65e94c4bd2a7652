"""Every example in docs/examples/tls-cert-manager and docs/examples/values is accepted by the test
bed's real API server, with cert-manager's and the Prometheus Operator's own CRDs installed.

Neither project's controller runs on the test bed, so the objects are applied with server-side dry
run: the API server validates them against the real CRD schemas (and ours, CEL rules included) and
stores nothing. What cert-manager would write into the Secret is read from its source at the pinned
version (testing/thirdparty.py) and compared with the keys the operator reads.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controllers.shared import layout, tls
from valkey_testbed import thirdparty
from valkey_testbed.build import binaries
from valkey_testbed.versions import KUBERNETES

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.usefixtures("valkey_crds")]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "valkey-operator"
TLS_EXAMPLE = ROOT / "docs" / "examples" / "tls-cert-manager"
VALUES_EXAMPLES = sorted((ROOT / "docs" / "examples" / "values").glob("*.yaml"))
FIELD_MANAGER = "examples-test"


def run(tool: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tool), *args], input=stdin, capture_output=True, text=True, timeout=180, check=False
    )


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run(binaries().kubectl, f"--kubeconfig={kubeconfig}", *args, stdin=stdin)


def dry_run(kubeconfig: Path, namespace: str | None, *args: str, stdin: str | None = None) -> str:
    """Server-side apply with server-side dry run (into namespace, or where each object says); the
    output (one line per object) or the refusal."""
    where = ["-n", namespace] if namespace else []
    done = kubectl(
        kubeconfig, "apply", "--server-side", "--dry-run=server", "--force-conflicts",
        f"--field-manager={FIELD_MANAGER}", *where, *args, stdin=stdin,
    )  # fmt: skip
    return done.stdout + done.stderr if done.returncode else done.stdout


def documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def applied(output: str, docs: list[dict[str, Any]]) -> list[str]:
    """The objects of docs that kubectl did not report as applied (server dry run)."""
    missing = []
    for doc in docs:
        name = doc["metadata"]["name"]
        kind = doc["kind"].lower()
        if not re.search(rf"^{re.escape(kind)}[\w.-]*/{re.escape(name)} serverside-applied", output, re.M):
            missing.append(f"{doc['kind']}/{name}")
    return missing


@pytest.fixture(scope="module")
def third_party_crds(kubeconfig_path: Path) -> Iterator[None]:
    """cert-manager's and the Prometheus Operator's CRDs, Established; deleted afterwards."""
    files = [*thirdparty.cert_manager_crds(), *thirdparty.prometheus_operator_crds()]
    assert len(files) >= 10, files
    # BaseLoader: the Prometheus Operator's CRDs hold a bare `=` (an enum value) that safe_load reads
    # as YAML's value tag.
    names = [yaml.load(path.read_text(), Loader=yaml.BaseLoader)["metadata"]["name"] for path in files]
    arguments = [flag for path in files for flag in ("-f", str(path))]
    done = kubectl(kubeconfig_path, "apply", "--server-side", f"--field-manager={FIELD_MANAGER}", *arguments)
    assert done.returncode == 0, done.stderr
    ready = kubectl(
        kubeconfig_path, "wait", "--for=condition=Established", "--timeout=60s",
        *(f"crd/{name}" for name in names),
    )  # fmt: skip
    assert ready.returncode == 0, ready.stderr
    yield
    kubectl(kubeconfig_path, "delete", "--wait=false", *(f"crd/{name}" for name in names))


@pytest.mark.usefixtures("third_party_crds")
def test_the_cert_manager_example_is_accepted_and_a_bad_certificate_is_not(
    kubeconfig_path: Path, namespace: str
) -> None:
    files = sorted(TLS_EXAMPLE.glob("*.yaml"))
    docs = [doc for path in files for doc in documents(path.read_text())]
    assert {doc["kind"] for doc in docs} == {"Issuer", "Certificate", "ValkeyCluster"}
    output = dry_run(kubeconfig_path, namespace, "-f", str(TLS_EXAMPLE))
    assert applied(output, docs) == [], output
    # Not vacuous: the real Certificate schema refuses a usage cert-manager does not know.
    certificate = next(doc for doc in docs if doc["metadata"]["name"] == "cache-tls")
    bad = {**certificate, "spec": {**certificate["spec"], "usages": ["server auth", "not a usage"]}}
    refused = dry_run(kubeconfig_path, namespace, "-f", "-", stdin=yaml.safe_dump(bad))
    assert "Unsupported value" in refused and "not a usage" in refused, refused


def go_constant(source: Path, name: str) -> str:
    match = re.search(rf"^\s*{name}\s*=\s*\"([^\"]+)\"", source.read_text(), re.M)
    assert match, f"{name} not in {source}"
    return match.group(1)


def written_keys() -> set[str]:
    """The Secret keys cert-manager's issuing controller writes for a Certificate issued by a CA
    Issuer, resolved from its source: corev1.TLSCertKey, corev1.TLSPrivateKeyKey, cmmeta.TLSCAKey."""
    root = thirdparty.cert_manager_dir()
    issuing = (root / "pkg/controller/certificates/issuing/internal/secret.go").read_text()
    core_types = thirdparty.kubernetes_api_dir() / "core/v1/types.go"
    meta_types = root / "pkg/apis/meta/v1/types.go"
    assert 'cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"' in issuing
    assigned = set(re.findall(r"secret\.Data\[(\w+\.\w+)\] = data\.(\w+)", issuing))
    assert assigned == {
        ("corev1.TLSPrivateKeyKey", "PrivateKey"),
        ("corev1.TLSCertKey", "Certificate"),
        ("cmmeta.TLSCAKey", "CA"),
    }, assigned
    # The CA Issuer answers with its CA, so data.CA (ca.crt) is set for certificates it signs.
    ca_issuer = (root / "pkg/controller/certificaterequests/ca/ca.go").read_text()
    assert re.search(r"\bCA:\s+bundle\.CAPEM", ca_issuer), "the CA Issuer no longer returns its CA"
    return {
        go_constant(core_types, "TLSCertKey"),
        go_constant(core_types, "TLSPrivateKeyKey"),
        go_constant(meta_types, "TLSCAKey"),
    }


def test_the_certificate_writes_the_secret_keys_the_cluster_reads() -> None:
    assert written_keys() == set(tls.KEYS) == {"tls.crt", "tls.key", "ca.crt"}
    assert (layout.TLS_CERT_KEY, layout.TLS_KEY_KEY, layout.TLS_CA_KEY) == ("tls.crt", "tls.key", "ca.crt")
    docs = {
        (doc["kind"], doc["metadata"]["name"]): doc
        for path in TLS_EXAMPLE.glob("*.yaml")
        for doc in documents(path.read_text())
    }
    cluster = next(doc for (kind, _), doc in docs.items() if kind == "ValkeyCluster")
    leaf = next(
        doc
        for (kind, _), doc in docs.items()
        if kind == "Certificate" and doc["spec"]["secretName"] == cluster["spec"]["tls"]["secretRef"]
    )
    # docs/tls.md: nodes are clients of each other, so the leaf needs both usages.
    assert {"server auth", "client auth"} <= set(leaf["spec"]["usages"])
    issuer = docs[("Issuer", leaf["spec"]["issuerRef"]["name"])]
    ca = next(
        doc
        for (kind, _), doc in docs.items()
        if kind == "Certificate" and doc["spec"]["secretName"] == issuer["spec"]["ca"]["secretName"]
    )
    assert ca["spec"]["isCA"] is True
    assert "selfSigned" in docs[("Issuer", ca["spec"]["issuerRef"]["name"])]["spec"]


@pytest.mark.usefixtures("third_party_crds")
@pytest.mark.parametrize("values", VALUES_EXAMPLES, ids=lambda path: path.stem)
def test_a_values_example_renders_and_the_api_server_accepts_every_object(
    kubeconfig_path: Path, namespace: str, values: Path
) -> None:
    watched = yaml.safe_load(values.read_text()).get("watchNamespaces") or []
    for name in watched:  # one an earlier run (a --count repeat) deleted may still be terminating
        kubectl(kubeconfig_path, "wait", "--for=delete", f"namespace/{name}", "--timeout=60s")
    created = [
        name
        for name in watched
        if kubectl(kubeconfig_path, "get", "namespace", name).returncode != 0
        and kubectl(kubeconfig_path, "create", "namespace", name).returncode == 0
    ]
    try:
        rendered = run(
            binaries().helm, "template", "valkey-operator", str(CHART), "-n", namespace,
            "-f", str(values), "--kube-version", KUBERNETES,
        )  # fmt: skip
        assert rendered.returncode == 0, rendered.stderr
        docs = documents(rendered.stdout)
        assert {"Deployment", "CustomResourceDefinition", "ServiceAccount"} <= {doc["kind"] for doc in docs}
        # The ServiceAccount admission plugin looks up a pod's account (the `helm test` pod's), which
        # a dry run does not store: the rendered ServiceAccounts are created for real first.
        accounts = [doc for doc in docs if doc["kind"] == "ServiceAccount"]
        created_accounts = kubectl(
            kubeconfig_path, "apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "-n", namespace,
            "-f", "-", stdin=yaml.safe_dump_all(accounts),
        )  # fmt: skip
        assert created_accounts.returncode == 0, created_accounts.stderr
        # helm template names every namespaced object's namespace (the release's, a watched one, or
        # `default` for the Events of cluster-scoped kinds).
        output = dry_run(kubeconfig_path, None, "-f", "-", stdin=rendered.stdout)
        assert applied(output, docs) == [], output
    finally:
        for name in created:
            kubectl(kubeconfig_path, "delete", "namespace", name, "--wait=false")


def test_the_values_examples_cover_the_monitoring_objects() -> None:
    """One example renders the Prometheus Operator objects, so their CRDs are exercised above."""
    kinds = set()
    for values in VALUES_EXAMPLES:
        rendered = run(
            binaries().helm, "template", "vo", str(CHART), "-f", str(values), "--kube-version", KUBERNETES
        )
        assert rendered.returncode == 0, rendered.stderr
        kinds |= {doc["kind"] for doc in documents(rendered.stdout)}
    assert {"ServiceMonitor", "PrometheusRule"} <= kinds
    assert len(VALUES_EXAMPLES) >= 3
