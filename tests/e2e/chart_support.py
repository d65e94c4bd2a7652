"""Installing the Helm chart on the test bed as a user would: the real helm and kubectl binaries.

The chart's CRDs are templates (docs/install.md), so Helm owns them through one release at a
time. Other tests install the same CRDs with server-side apply, so each chart test first adopts
them into its own release, exactly as docs/install.md tells users who installed them by hand.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from valkey_operator.core.client import Client
from valkey_operator.core.resource import CUSTOM_RESOURCE_DEFINITIONS, PODS
from valkey_operator.core.rest import Obj
from valkey_testbed.build import binaries
from valkey_testbed.crds import product_crds
from valkey_testbed.operatorproc import BACKUP_ENDPOINT_NETWORKS, NODE_NETWORKS

CHART = Path(__file__).resolve().parents[2] / "charts" / "valkey-operator"
RELEASE = "vo"
TEST_BED_VALUES = (
    f"nodeNetworks={NODE_NETWORKS}",
    f"backupEndpointAllowedNetworks={BACKUP_ENDPOINT_NETWORKS}",
)
"""What every install on the test bed sets: loopback pod IPs, and an object store on 127.0.0.1 (a
backup endpoint the chart's default refuses). The image is the chart's default,
valkey-operator:<appVersion>, which `python -m valkey_testbed build` built from the
Containerfile and the kubelet runs with runc."""


def run(tool: Path, kubeconfig: Path, *args: str, check: bool = True, timeout: float = 300) -> str:
    """The tool's stdout; with check=False, stdout and stderr (a refusal's message is on stderr)."""
    argv = [str(tool), f"--kubeconfig={kubeconfig}", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout if check else done.stdout + done.stderr


def helm(kubeconfig: Path, *args: str, check: bool = True) -> str:
    return run(binaries().helm, kubeconfig, *args, check=check)


def kubectl(kubeconfig: Path, *args: str, check: bool = True) -> str:
    return run(binaries().kubectl, kubeconfig, *args, check=check)


def set_flags(values: Sequence[str]) -> list[str]:
    return [flag for value in (*TEST_BED_VALUES, *values) for flag in ("--set", value)]


def install(
    kubeconfig: Path, namespace: str, *values: str, chart: Path = CHART, command: str = "install"
) -> float:
    """helm install (or upgrade) with --wait; the seconds it took."""
    started = time.monotonic()
    helm(
        kubeconfig,
        command,
        RELEASE,
        str(chart),
        "-n",
        namespace,
        "--wait",
        "--timeout",
        "4m",
        *set_flags(values),
    )
    return time.monotonic() - started


def package(target: Path, chart: Path = CHART) -> Path:
    """`helm package` of the chart (default: this one) into target: the .tgz users install."""
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(binaries().helm), "package", str(chart), "-d", str(target)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    (archive,) = target.glob("valkey-operator-*.tgz")
    return archive


async def adopt_crds(kube: Client, namespace: str) -> None:
    """Label and annotate the CRDs for this release (docs/install.md, "CRDs installed by hand")."""
    for path in product_crds():
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        patch = {
            "metadata": {
                "labels": {"app.kubernetes.io/managed-by": "Helm"},
                "annotations": {
                    "meta.helm.sh/release-name": RELEASE,
                    "meta.helm.sh/release-namespace": namespace,
                },
            }
        }
        await kube.patch(CUSTOM_RESOURCE_DEFINITIONS, name, patch)


def previous_chart(target: Path, dropped_field: str) -> Path:
    """This chart as a previous release: version 0.1.0, and the ValkeyCluster CRD without
    spec.<dropped_field> (a field added since)."""
    shutil.copytree(CHART, target, symlinks=False)
    chart_file = target / "Chart.yaml"
    meta = yaml.safe_load(chart_file.read_text())
    meta["version"] = "0.1.0"
    chart_file.write_text(yaml.safe_dump(meta))
    crd_file = target / "files" / "crds" / "valkeyclusters.yaml"
    crd: Obj = yaml.safe_load(crd_file.read_text())
    for version in crd["spec"]["versions"]:
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        del spec["properties"][dropped_field]
        spec["x-kubernetes-validations"] = [
            rule for rule in spec.get("x-kubernetes-validations", []) if dropped_field not in rule["rule"]
        ]
    crd_file.write_text(yaml.safe_dump(crd))
    return target


def can_i_list(kubeconfig: Path, account: str, namespace: str) -> set[str]:
    """`kubectl auth can-i --list` for the ServiceAccount in namespace, one normalised line per rule,
    without what every authenticated user or service account may do (discovery URLs, self reviews,
    cluster trust bundles)."""
    text = kubectl(kubeconfig, "auth", "can-i", "--list", f"--as={account}", "-n", namespace)
    rules = set()
    for line in text.splitlines()[1:]:
        fields = line.split()
        if not fields or fields[0].startswith(("selfsubject", "[", "clustertrustbundles.")):
            continue
        rules.add(" ".join(fields))
    return rules


def can_i(kubeconfig: Path, account: str, *args: str) -> bool:
    answer = kubectl(kubeconfig, "auth", "can-i", f"--as={account}", *args, check=False).strip()
    return answer.startswith("yes")  # stdout first; kubectl's warnings follow on stderr


async def operator_pods(kube: Client, namespace: str) -> list[Obj]:
    """The release's operator pods in namespace, those going away left out."""
    pods = await kube.list(PODS, namespace, label_selector=f"app.kubernetes.io/instance={RELEASE}")
    return [pod for pod in pods if not pod["metadata"].get("deletionTimestamp")]
