"""Third-party CRDs and sources the example tests need, from the Go module proxy, never the repo.

The examples in docs/examples use cert-manager's Certificate and Issuer and the Prometheus
Operator's ServiceMonitor, PodMonitor and PrometheusRule. A real API server accepts those only
with their CRDs installed, and neither project's controller runs on the test bed. Both projects
publish their CRDs inside their Go module (cert-manager: deploy/crds/; prometheus-operator:
example/prometheus-operator-crd/), so `go mod download` at the versions pinned in versions.py
puts them in the Go module cache (read-only, outside the repository), where the tests read them.
"""

from __future__ import annotations

import functools
import json
import subprocess
import tempfile
from pathlib import Path

from valkey_testbed import versions
from valkey_testbed.build import BuildError, Progress, go_env

CERT_MANAGER_MODULE = "github.com/cert-manager/cert-manager"
PROMETHEUS_OPERATOR_MODULE = "github.com/prometheus-operator/prometheus-operator"
KUBERNETES_API_MODULE = "k8s.io/api"


@functools.cache
def module_dir(module: str, version: str) -> Path:
    """The extracted module in the Go module cache (downloaded once); BuildError with go's own
    message when the proxy refuses it."""
    with tempfile.TemporaryDirectory(prefix="gomod-") as work:
        done = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            cwd=work,
            env=go_env(Path(work)),
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    try:
        answer = json.loads(done.stdout or "{}")
    except json.JSONDecodeError:
        answer = {}
    if done.returncode != 0 or answer.get("Error") or not answer.get("Dir"):
        said = answer.get("Error") or done.stderr.strip() or done.stdout.strip()
        raise BuildError(f"go mod download {module}@{version} failed: {said}")
    return Path(answer["Dir"])


def cert_manager_dir() -> Path:
    return module_dir(CERT_MANAGER_MODULE, versions.CERT_MANAGER)


def cert_manager_crds() -> list[Path]:
    """cert-manager's CRDs (Certificate, Issuer, ClusterIssuer, CertificateRequest, ACME)."""
    return sorted((cert_manager_dir() / "deploy" / "crds").glob("*.yaml"))


def prometheus_operator_crds() -> list[Path]:
    """The Prometheus Operator's CRDs (ServiceMonitor, PodMonitor, PrometheusRule, ...)."""
    root = module_dir(PROMETHEUS_OPERATOR_MODULE, versions.PROMETHEUS_OPERATOR)
    return sorted((root / "example" / "prometheus-operator-crd").glob("*.yaml"))


def required_version(gomod: Path, module: str) -> str:
    """The version of module a go.mod requires."""
    for line in gomod.read_text().splitlines():
        fields = line.split("//")[0].split()
        if module in fields[:-1] and not line.lstrip().startswith("replace"):
            return fields[fields.index(module) + 1]
    raise BuildError(f"{gomod} does not require {module}")


def kubernetes_api_dir() -> Path:
    """k8s.io/api at the version cert-manager builds with (its corev1 Secret key constants)."""
    version = required_version(cert_manager_dir() / "go.mod", KUBERNETES_API_MODULE)
    return module_dir(KUBERNETES_API_MODULE, version)


def fetch(progress: Progress = print) -> None:
    """Download both modules (the test bed's build calls this, so tests start warm)."""
    progress(f"cert-manager {versions.CERT_MANAGER} CRDs: {len(cert_manager_crds())} in the Go module cache")
    kubernetes_api_dir()
    count = len(prometheus_operator_crds())
    progress(f"prometheus-operator {versions.PROMETHEUS_OPERATOR} CRDs: {count} in the Go module cache")
