"""The README's "run it" command: the operator doing its job on the local test bed.

Builds (or reuses) the control plane, starts it, installs the CRDs, runs the
operator against it, applies the curated examples, and shows the result with
kubectl. The control plane is left running for exploration; the operator is
stopped at the end (`down` stops the control plane).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from valkey_operator.testing import processes
from valkey_operator.testing.build import build
from valkey_operator.testing.controlplane import ControlPlane
from valkey_operator.testing.images import resolve_image

ROOT = Path(__file__).resolve().parents[2]


def _show(title: str) -> None:
    print(f"\n$ {title}", flush=True)


def run_demo(state_dir: Path) -> int:
    bins = build()
    plane = ControlPlane(state_dir, nodes=3)
    plane.up()
    kubectl = [str(bins.kubectl), f"--kubeconfig={plane.kubeconfig}"]

    def run(*args: str, show: bool = True) -> None:
        if show:
            _show("kubectl " + " ".join(args))
        subprocess.run([*kubectl, *args], check=True)

    run("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    kinds = ("valkeyimages", "valkeyconfigs", "valkeyroles", "valkeyclusters")
    run(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        *(f"crd/{k}.valkey.gomomento.com" for k in kinds),
    )
    operator = processes.start(
        "valkey-operator",
        [
            sys.executable,
            "-m",
            "valkey_operator",
            f"--kubeconfig={plane.kubeconfig}",
            "--metrics-bind-address=127.0.0.1:0",
            "--health-probe-bind-address=127.0.0.1:0",
            "--log-format=json",
        ],
        plane.logs / "operator.log",
    )
    try:
        run("apply", "-f", str(ROOT / "docs" / "examples" / "curated.yaml"))
        run("wait", "--for=condition=Resolved", "--timeout=60s", "valkeyconfig/cache-large")
        run("get", "valkeyimages,valkeyconfigs,valkeyroles")
        run("get", "valkeyimage/valkey-9-1", "-o", "jsonpath={.metadata.finalizers}{'\\n'}")
        run("apply", "-f", str(ROOT / "docs" / "examples" / "cluster.yaml"))
        run("wait", "--for=jsonpath={.status.state}=Active", "--timeout=300s", "valkeycluster/demo")
        run("get", "valkeyclusters", "-A")
        run("get", "pods", "-l", "valkey.gomomento.com/cluster=demo", "-o", "wide")
        _write_and_read_a_key(kubectl)
    finally:
        processes.stop([operator])
    print(
        f"\nThe control plane keeps running. Explore it with:\n"
        f'  eval "$(python -m valkey_operator.testing env --state-dir {state_dir})"\n'
        f"Operator log: {plane.logs / 'operator.log'}\n"
        f"Stop it with: python -m valkey_operator.testing down --state-dir {state_dir}"
    )
    return 0


def _write_and_read_a_key(kubectl: list[str]) -> None:
    """SET and GET through the cluster as the example's ACL user, following redirects (-c)."""
    pod_ip = subprocess.run(
        [
            *kubectl,
            "get",
            "pods",
            "-l",
            "valkey.gomomento.com/cluster=demo",
            "-o",
            "jsonpath={.items[0].status.podIP}",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    image = resolve_image("valkey/valkey:9.1.2")
    if image is None:
        raise SystemExit(
            "the valkey/valkey:9.1.2 image is not installed: run `python -m valkey_operator.testing build`"
        )
    cli = [str(image.executable("valkey-cli")), "-c", "-h", pod_ip, "-p", "6379", "--user", "app"]
    cli += ["--pass", "demo-password", "--no-auth-warning"]
    for command in (["SET", "greeting", "hello from valkey"], ["GET", "greeting"]):
        _show("valkey-cli -c -h " + pod_ip + " --user app " + " ".join(command))
        subprocess.run([*cli, *command], check=True)
