"""Command line for the local test bed: build, up, env, down.

python -m valkey_operator.testing build
python -m valkey_operator.testing up --state-dir DIR [--nodes N]
python -m valkey_operator.testing env --state-dir DIR
python -m valkey_operator.testing down --state-dir DIR
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from valkey_operator.testing import build
from valkey_operator.testing.controlplane import ControlPlane, ControlPlaneError
from valkey_operator.testing.demo import run_demo


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m valkey_operator.testing", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build (or reuse) the control-plane binaries")
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "build":
        return build.main()
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
        print(f"control plane ready{nodes} in {elapsed:.1f}s; kubeconfig: {plane.kubeconfig}")
    elif args.command == "env":
        print(f"export KUBECONFIG={shlex.quote(str(plane.kubeconfig))}")
        print(f'export PATH={shlex.quote(str(plane.bins.bin_dir))}:"$PATH"')
    elif args.command == "down":
        plane.down()
    elif args.command == "demo":
        return run_demo(plane.state_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
