"""The operator's command-line settings."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import attrs

CONTROLLERS = ("image", "config", "role", "cluster")


@attrs.frozen
class Settings:
    kubeconfig: str | None
    metrics_bind_address: str
    health_probe_bind_address: str
    leader_elect: bool
    leader_election_namespace: str | None
    leader_election_id: str
    namespace: str | None
    log_format: str
    log_level: str
    workers: dict[str, int]


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="valkey-operator", description="Kubernetes operator for sharded Valkey clusters."
    )
    parser.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG, else in-cluster config)")
    parser.add_argument(
        "--metrics-bind-address", default=":8080", help="Prometheus /metrics address; 0 disables"
    )
    parser.add_argument(
        "--health-probe-bind-address", default=":8081", help="/healthz and /readyz address; 0 disables"
    )
    parser.add_argument("--leader-elect", action="store_true", help="elect a leader so only one replica acts")
    parser.add_argument(
        "--leader-election-namespace",
        help="namespace of the leader Lease (default: the operator's own namespace)",
    )
    parser.add_argument(
        "--leader-election-id", default="valkey-operator-leader", help="name of the leader Lease"
    )
    parser.add_argument("--namespace", help="reconcile ValkeyClusters in this namespace only (default: all)")
    parser.add_argument(
        "--log-format",
        choices=("json", "console"),
        default="console" if sys.stderr.isatty() else "json",
        help="log format (default: console on a terminal, json otherwise)",
    )
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    for controller in CONTROLLERS:
        parser.add_argument(
            f"--{controller}-workers",
            type=_positive,
            default=4 if controller == "cluster" else 2,
            help=f"concurrent reconciles of the {controller} controller",
        )
    return parser


def parse(argv: Sequence[str] | None = None) -> Settings:
    args = parser().parse_args(argv)
    return Settings(
        kubeconfig=args.kubeconfig,
        metrics_bind_address=args.metrics_bind_address,
        health_probe_bind_address=args.health_probe_bind_address,
        leader_elect=args.leader_elect,
        leader_election_namespace=args.leader_election_namespace,
        leader_election_id=args.leader_election_id,
        namespace=args.namespace,
        log_format=args.log_format,
        log_level=args.log_level,
        workers={name: getattr(args, f"{name}_workers") for name in CONTROLLERS},
    )
