"""Drive a running test-bed kubelet from a shell (see control.py for the protocol).

python -m valkey_testbed.kubelet.ctl --state-dir DIR status
python -m valkey_testbed.kubelet.ctl --state-dir DIR fail-node [--lose-disk] NODE
python -m valkey_testbed.kubelet.ctl --state-dir DIR recover-node NODE
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from valkey_testbed.kubelet.control import ControlError, KubeletControl


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m valkey_testbed.kubelet.ctl")
    parser.add_argument("--state-dir", type=Path, required=True)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="nodes and pods as the kubelet sees them (JSON)")
    for name in ("fail-node", "recover-node"):
        commands.add_parser(name).add_argument("node")
    commands.choices["fail-node"].add_argument(
        "--lose-disk", action="store_true", help="the node's disk is lost too (local-path volumes, emptyDirs)"
    )
    args = parser.parse_args(argv)
    control = KubeletControl(args.state_dir.resolve())
    try:
        if args.command == "status":
            print(json.dumps(asyncio.run(control.status()), indent=2))
        elif args.command == "fail-node":
            asyncio.run(control.fail_node(args.node, lose_disk=args.lose_disk))
        else:
            asyncio.run(control.recover_node(args.node))
    except ControlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
