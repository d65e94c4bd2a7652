"""Command line for the local test bed: build, up, env, down, demo, compat, fuzz.

python -m valkey_operator.testing build [--kubernetes MINOR]
python -m valkey_operator.testing up --state-dir DIR [--nodes N] [--kubernetes MINOR]
python -m valkey_operator.testing env --state-dir DIR
python -m valkey_operator.testing down --state-dir DIR
python -m valkey_operator.testing compat [--minors 1.36,1.37]
python -m valkey_operator.testing build-image
python -m valkey_operator.testing chaos --seed N --minutes M [--state-dir DIR] [--plain] [--json FILE]
python -m valkey_operator.testing fuzz --seed N --examples M [--rounds R] [--state-dir DIR]

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
    fuzz = commands.add_parser(
        "fuzz", help="send hypothesis-generated objects to a test bed with the operator running; count"
    )
    fuzz.add_argument("--seed", type=int, default=0, help="hypothesis seed (the same seed, the same objects)")
    fuzz.add_argument("--examples", type=int, default=100, help="examples in all (each a few writes)")
    fuzz.add_argument("--rounds", type=int, default=4, help="rounds: settle, quiet window, delete all")
    fuzz.add_argument("--state-dir", type=Path, help="use (or start) the test bed here; default: a fresh one")
    chaos_command = commands.add_parser(
        "chaos", help="faults and spec changes at seeded random under client load; checks the invariants"
    )
    chaos_command.add_argument(
        "--seed", type=int, required=True, help="the schedule's seed (reproduces a run)"
    )
    chaos_command.add_argument(
        "--minutes", type=float, required=True, help="how long faults and changes go on"
    )
    chaos_command.add_argument("--state-dir", type=Path, help="reuse (or start and keep) the test bed there")
    chaos_command.add_argument(
        "--plain", action="store_true", help="a cluster without TLS (rolls change image)"
    )
    chaos_command.add_argument("--json", type=Path, help="also write the JSON summary to this file")
    chaos_command.add_argument(
        "--log-dir", type=Path, help="operator and benchmark logs (default: the state dir)"
    )
    chaos_command.add_argument("--no-benchmark", action="store_true", help="no valkey-benchmark load")
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
    if args.command == "chaos":
        from valkey_operator.testing.chaos import command  # imports pytest (the plugin's kubelet settings)

        return command.main(
            seed=args.seed,
            minutes=args.minutes,
            state_dir=args.state_dir,
            tls=not args.plain,
            json_path=args.json,
            log_dir=args.log_dir,
            benchmark=not args.no_benchmark,
        )
    if args.command == "fuzz":
        from valkey_operator.testing.fuzz import cli  # hypothesis: imported only for this command

        return cli.main(args.seed, args.examples, args.rounds, args.state_dir)
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
