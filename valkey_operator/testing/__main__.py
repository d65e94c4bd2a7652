"""Command line for the local test bed: build, up, env, down, demo, compat.

python -m valkey_operator.testing build [--kubernetes MINOR]
python -m valkey_operator.testing up --state-dir DIR [--nodes N] [--kubernetes MINOR]
python -m valkey_operator.testing env --state-dir DIR
python -m valkey_operator.testing down --state-dir DIR
python -m valkey_operator.testing compat [--minors 1.36,1.37]
python -m valkey_operator.testing build-image

--kubernetes (a minor such as 1.36, or a release such as v1.36.3) does what the environment
variable VALKEY_OPERATOR_KUBERNETES does; the default is versions.KUBERNETES.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

from valkey_operator.testing import build, compat, kubeversion, operatorimage
from valkey_operator.testing.controlplane import ControlPlane, ControlPlaneError
from valkey_operator.testing.demo import run_demo


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m valkey_operator.testing", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    kube_help = (
        "Kubernetes minor (1.36) or release (v1.36.3) of versions.KUBERNETES_MINORS; default "
        f"${kubeversion.ENV}, else {kubeversion.default_release().kubernetes}"
    )
    built = commands.add_parser("build", help="build (or reuse) the control-plane binaries")
    built.add_argument("--kubernetes", help=kube_help)
    commands.add_parser(
        "build-image", help="build the operator image from the Containerfile and load it for the kubelet"
    )
    compat_command = commands.add_parser(
        "compat", help="build and run the chart's scenario on each Kubernetes minor; record the results"
    )
    compat_command.add_argument(
        "--minors",
        help="comma-separated minors (default: every minor of versions.KUBERNETES_MINORS, oldest first)",
    )
    for name, text in (
        ("up", "start the control plane and return once the API server is ready"),
        ("env", "print shell exports for KUBECONFIG and PATH (kubectl, helm)"),
        ("down", "stop every process the state dir started"),
        ("demo", "build, start, install the CRDs and show the operator at work"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument(
            "--state-dir", type=Path, required=True, help="directory holding the test bed's state"
        )
        if name == "up":
            command.add_argument(
                "--nodes", type=int, default=3, help="nodes of the process kubelet (0: no kubelet, no pods)"
            )
        if name in ("up", "demo"):
            command.add_argument("--kubernetes", help=kube_help)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "kubernetes", None):
        try:
            kubeversion.parse(args.kubernetes)
        except kubeversion.UnknownKubernetesVersion as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        # Like the variable: every process started from here (the kubelet, pytest) sees the choice.
        os.environ[kubeversion.ENV] = args.kubernetes
    if args.command == "build":
        return build.main(kubeversion.selected())
    if args.command == "build-image":
        return operatorimage.main()
    if args.command == "compat":
        return compat.main(args.minors)
    plane = ControlPlane(args.state_dir.resolve(), nodes=getattr(args, "nodes", 0))
    if args.command == "up":
        started = time.monotonic()
        try:
            plane.up()
        except ControlPlaneError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        nodes = f" with {plane.nodes} nodes" if plane.nodes else ""
        elapsed = time.monotonic() - started
        release = plane.bins.bin_dir.parent.name
        print(f"control plane ({release}) ready{nodes} in {elapsed:.1f}s; kubeconfig: {plane.kubeconfig}")
    elif args.command == "env":
        print(f"export KUBECONFIG={shlex.quote(str(plane.kubeconfig))}")
        print(f'export PATH={shlex.quote(str(plane.recorded_bin_dir() or plane.bins.bin_dir))}:"$PATH"')
    elif args.command == "down":
        plane.down()
    elif args.command == "demo":
        return run_demo(plane.state_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
