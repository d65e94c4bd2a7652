"""The README's "run it" command: the operator doing its job on the local test bed.

Builds (or reuses) the control plane, starts it, installs the CRDs, runs the
operator against it, applies the curated examples, and shows the result with
kubectl. The control plane is left running for exploration; the operator is
stopped at the end (`down` stops the control plane).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from valkey_testbed import processes
from valkey_testbed.build import build
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.images import newest_image, resolve_image, valkey_version
from valkey_testbed.operatorproc import operator_argv

ROOT = Path(__file__).resolve().parents[2]
CURATED = ROOT / "docs" / "examples" / "curated.yaml"


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
        operator_argv(plane.kubeconfig),
        plane.logs / "operator.log",
    )
    try:
        run("apply", "-f", str(curated_examples(newest_image(), plane.state_dir)))
        run("wait", "--for=condition=Resolved", "--timeout=60s", "valkeyconfig/cache-large")
        # The roles' printed summary is their status, written by the role controller on its own.
        run("wait", "--for=condition=Ready", "--timeout=60s", "valkeyroles", "--all", show=False)
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
        f'  eval "$(python -m valkey_testbed env --state-dir {state_dir})"\n'
        f"Operator log: {plane.logs / 'operator.log'}\n"
        f"Stop it with: python -m valkey_testbed down --state-dir {state_dir}"
    )
    return 0


def curated_examples(image: str, directory: Path) -> Path:
    """docs/examples/curated.yaml, or a copy in directory whose ValkeyImage is image's version.

    The example names the version the TLS image is pinned at; once Debian has
    moved on the test bed runs another (images.tls_build), and a pod of an
    image the catalog lacks would wait forever.
    """
    version = valkey_version(image)
    documents = list(yaml.safe_load_all(CURATED.read_text()))
    specs = [doc["spec"] for doc in documents if doc["kind"] == "ValkeyImage"]
    if all(spec["tag"] == spec["version"] == version for spec in specs):
        return CURATED
    for spec in specs:
        spec.update(tag=version, version=version)
    copy = directory / "curated.yaml"
    copy.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return copy


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
    reference = newest_image()
    image = resolve_image(reference)
    if image is None:
        raise SystemExit(f"the {reference} image is not installed: run `python -m valkey_testbed build`")
    cli = [str(image.executable("valkey-cli")), "-c", "-h", pod_ip, "-p", "6379", "--user", "app"]
    cli += ["--pass", "demo-password", "--no-auth-warning"]
    for command in (["SET", "greeting", "hello from valkey"], ["GET", "greeting"]):
        _show("valkey-cli -c -h " + pod_ip + " --user app " + " ".join(command))
        subprocess.run([*cli, *command], check=True)
