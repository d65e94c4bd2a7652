"""Command line for the local test bed: build, up, env, down, demo, compat, fuzz.

python -m valkey_testbed build [--kubernetes MINOR] [--nodes-runtime containerd]
python -m valkey_testbed up --state-dir DIR [--nodes N] [--nodes-runtime containerd] [--kubernetes MINOR]
python -m valkey_testbed env --state-dir DIR
python -m valkey_testbed down --state-dir DIR
python -m valkey_testbed compat [--minors 1.36,1.37]
python -m valkey_testbed build-image
python -m valkey_testbed chaos --seed N --minutes M [--state-dir DIR] [--plain] [--json FILE]
python -m valkey_testbed fuzz --seed N --examples M [--rounds R] [--state-dir DIR]

Every command runs after a plain `pip install -e . -e testbed` except two that need the test bed's
`testing` extra (TESTING_EXTRA): fuzz (hypothesis generates its objects) and compat (it runs a test
through pytest). Without it they stop at once with one line naming the extra, not a traceback. Each
command's code is imported only when that command runs (its parser's `implementation` default, plus
`needs`), so `--help` never depends on an extra; tests/unit/testing/test_cli_without_extras.py runs
every command's imports with the extra's modules hidden.

--kubernetes (a minor such as 1.36, or a release such as v1.36.3) does what the environment
variable VALKEY_OPERATOR_KUBERNETES does; the default is versions.KUBERNETES.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import sys
import time
from pathlib import Path

from valkey_testbed import kubeversion

TESTING_EXTRA = frozenset({"pytest", "_pytest", "pytest_asyncio", "pytest_timeout", "xdist", "hypothesis"})
"""Top-level modules that only the test bed's `testing` extra installs (testbed/setup.cfg)."""
INSTALL_TESTING = "pip install -e 'testbed[testing]'"


class MissingExtra(Exception):
    """A command needs a module of the testing extra, which is not installed: one line says so."""


def load(args: argparse.Namespace) -> None:
    """Import what the chosen command runs (its `implementation` and `needs`), or raise MissingExtra
    naming the extra when one of the testing extra's modules is missing."""
    for name in (args.implementation, *args.needs):
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").split(".")[0]
            if missing not in TESTING_EXTRA:
                raise
            raise MissingExtra(
                f"error: `python -m valkey_testbed {args.command}` needs the testing extra "
                f"(no module named {missing!r}): {INSTALL_TESTING}"
            ) from exc


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    text: str,
    implementation: str,
    needs: tuple[str, ...] = (),
) -> argparse.ArgumentParser:
    """A subcommand, with the module its code lives in and the extra modules it runs."""
    command = commands.add_parser(name, help=text)
    command.set_defaults(implementation=implementation, needs=needs)
    return command


def command_line() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m valkey_testbed", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    kube_help = (
        "Kubernetes minor (1.36) or release (v1.36.3) of versions.KUBERNETES_MINORS; default "
        f"${kubeversion.ENV}, else {kubeversion.default_release().kubernetes}"
    )
    testing = "valkey_testbed"
    built = _command(commands, "build", "build (or reuse) the control-plane binaries", f"{testing}.build")
    built.add_argument("--kubernetes", help=kube_help)
    built.add_argument(
        "--nodes-runtime",
        choices=("process", "containerd"),
        default="process",
        help="containerd: also the real nodes' binaries and images (realnodes/; the suite's real-node tests)",
    )
    _command(
        commands,
        "build-image",
        "build the operator image from the Containerfile and load it for the kubelet",
        f"{testing}.operatorimage",
    )
    compat_command = _command(
        commands,
        "compat",
        "build and run the chart's scenario on each Kubernetes minor; record the results",
        f"{testing}.compat",
        needs=("pytest", "pytest_asyncio"),  # each minor's scenario runs as `python -m pytest`
    )
    compat_command.add_argument(
        "--minors",
        help="comma-separated minors (default: every minor of versions.KUBERNETES_MINORS, oldest first)",
    )
    _command(
        commands,
        "realnodes",
        "run the users' scenario on real nodes and on the process kubelet; print both side by side",
        f"{testing}.realnodes.scenario",
        needs=("pytest", "pytest_asyncio"),  # the scenario runs as `python -m pytest`
    )
    fuzz = _command(
        commands,
        "fuzz",
        "send hypothesis-generated objects to a test bed with the operator running; count",
        f"{testing}.fuzz.cli",
    )
    fuzz.add_argument("--seed", type=int, default=0, help="hypothesis seed (the same seed, the same objects)")
    fuzz.add_argument("--examples", type=int, default=100, help="examples in all (each a few writes)")
    fuzz.add_argument("--rounds", type=int, default=4, help="rounds: settle, quiet window, delete all")
    fuzz.add_argument("--state-dir", type=Path, help="use (or start) the test bed here; default: a fresh one")
    chaos_command = _command(
        commands,
        "chaos",
        "faults and spec changes at seeded random under client load; checks the invariants",
        f"{testing}.chaos.command",
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
    peer_command = _command(
        commands,
        "peer-build",
        "build the official operator (the comparisons' peer) from a git repository; print its exports",
        f"{testing}.peerbuild",
    )
    peer_command.add_argument("--source", type=Path, required=True, help="a git directory of its repository")
    peer_command.add_argument("--ref", default="v0.5.0", help="tag or commit to build (default v0.5.0)")
    for name, text in (
        ("up", "start the control plane and return once the API server is ready"),
        ("env", "print shell exports for KUBECONFIG and PATH (kubectl, helm)"),
        ("down", "stop every process the state dir started"),
        ("demo", "build, start, install the CRDs and show the operator at work"),
    ):
        implementation = f"{testing}.demo" if name == "demo" else f"{testing}.controlplane"
        command = _command(commands, name, text, implementation)
        command.add_argument(
            "--state-dir", type=Path, required=True, help="directory holding the test bed's state"
        )
        if name == "up":
            command.add_argument(
                "--nodes", type=int, default=3, help="nodes of the process kubelet (0: no kubelet, no pods)"
            )
            command.add_argument(
                "--nodes-runtime",
                choices=("process", "containerd"),
                default="process",
                help="process: the test bed's own kubelet (default); containerd: real kubelets on "
                "containerd, runc, a CNI bridge and CoreDNS (realnodes/; root, one bed per machine)",
            )
        if name in ("up", "demo"):
            command.add_argument("--kubernetes", help=kube_help)
    return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands by name (tests cover each one the command line has)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def main(argv: list[str] | None = None) -> int:
    args = command_line().parse_args(argv)
    if getattr(args, "kubernetes", None):
        try:
            kubeversion.parse(args.kubernetes)
        except kubeversion.UnknownKubernetesVersion as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        # Like the variable: every process started from here (the kubelet, pytest) sees the choice.
        os.environ[kubeversion.ENV] = args.kubernetes
    try:
        load(args)
    except MissingExtra as exc:
        print(exc, file=sys.stderr)
        return 2
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    """The chosen command (its modules are importable: load() checked)."""
    if args.command == "build":
        from valkey_testbed import build

        built = build.main(kubeversion.selected())
        if built != 0 or args.nodes_runtime != "containerd":
            return built
        from valkey_testbed.realnodes import prepare

        return prepare.main()
    if args.command == "build-image":
        from valkey_testbed import operatorimage

        return operatorimage.main()
    if args.command == "compat":
        from valkey_testbed import compat

        return compat.main(args.minors)
    if args.command == "realnodes":
        from valkey_testbed.realnodes import scenario

        return scenario.main()
    if args.command == "chaos":
        from valkey_testbed.chaos import command

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
        from valkey_testbed.fuzz import cli

        return cli.main(args.seed, args.examples, args.rounds, args.state_dir)
    if args.command == "peer-build":
        from valkey_testbed import peerbuild

        return peerbuild.main(args.source, args.ref)
    if args.command == "demo":
        from valkey_testbed.demo import run_demo

        return run_demo(args.state_dir.resolve())
    from valkey_testbed.controlplane import ControlPlane, ControlPlaneError

    if args.command in ("up", "down") and _real_nodes(args):
        return _real_nodes_command(args)
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
    return 0


def _real_nodes(args: argparse.Namespace) -> bool:
    """up with --nodes-runtime containerd, or down of a state dir real nodes run from."""
    if args.command == "up":
        return bool(args.nodes_runtime == "containerd")
    from valkey_testbed.realnodes.bed import STATE_FILE

    return Path(args.state_dir, STATE_FILE).exists()


def _real_nodes_command(args: argparse.Namespace) -> int:
    from valkey_testbed.realnodes.bed import RealNodesBed, RealNodesError

    state_dir = args.state_dir.resolve()
    if args.command == "down":
        left = RealNodesBed(state_dir).down()
        for thing in left:
            print(f"error: still on the host after down: {thing}", file=sys.stderr)
        return 1 if left else 0
    started = time.monotonic()
    bed = RealNodesBed(state_dir, nodes=args.nodes)
    try:
        bed.up(lambda line: print(line, flush=True))
    except RealNodesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - started
    print(f"control plane and {args.nodes} real nodes ready in {elapsed:.1f}s; kubeconfig: {bed.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
