"""The operator process: `python -m valkey_operator` (console script `valkey-operator`)."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="valkey-operator", description="Kubernetes operator for Valkey clusters")
    parser.add_argument("--kubeconfig", help="kubeconfig path (in-cluster config when unset)")
    parser.parse_args(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
