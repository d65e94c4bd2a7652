"""The operator as a separate process against a test-bed kubeconfig (benchmarks run it this way).

`install_crds` applies crds/ with the test bed's kubectl and waits until they
are served; `start_operator` runs `python -m valkey_operator` with metrics and
probes on loopback ephemeral ports and JSON logs, as a `processes` record the
caller stops by pid.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from valkey_operator.testing import processes
from valkey_operator.testing.build import binaries

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("valkeyimages", "valkeyconfigs", "valkeyroles", "valkeyclusters")


def kubectl(kubeconfig: str, *args: str) -> None:
    argv = [str(binaries().kubectl), f"--kubeconfig={kubeconfig}", *args]
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120)


def install_crds(kubeconfig: str) -> None:
    kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    crds = [f"crd/{kind}.valkey.gomomento.com" for kind in KINDS]
    kubectl(kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", *crds)


def operator_argv(kubeconfig: str | Path, *flags: str) -> list[str]:
    """`python -m valkey_operator` against kubeconfig, metrics and probes on loopback ephemeral ports,
    JSON logs, plus flags."""
    return [
        sys.executable,
        "-m",
        "valkey_operator",
        f"--kubeconfig={kubeconfig}",
        "--metrics-bind-address=127.0.0.1:0",
        "--health-probe-bind-address=127.0.0.1:0",
        "--log-format=json",
        *flags,
    ]


def start_operator(kubeconfig: str, log_dir: Path) -> processes.ProcessRecord:
    return processes.start("valkey-operator", operator_argv(kubeconfig), log_dir / "operator.log")
