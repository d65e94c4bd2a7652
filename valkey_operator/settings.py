"""The operator's command-line settings, every value validated before anything starts (SPEC 1.5).

`parse` raises `InvalidValue` (a flag's value is not allowed) or `UsageError`
(argparse's own complaint, such as an unknown flag); either is one line, and
`__main__` prints it and exits with status 2. The full list, with defaults and
allowed values, is docs/operator-configuration.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

import attrs

from valkey_operator import validation
from valkey_operator.validation import InvalidValue
from valkey_operator.valkey.admin import Network

CONTROLLERS = ("image", "config", "role", "cluster", "backup")
LOG_FORMATS = ("json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error")
ANY_ADDRESS = "0.0.0.0/0,::/0"
POD_NAMESPACE_ENV = "POD_NAMESPACE"
OPERATOR_IMAGE_ENV = "VALKEY_OPERATOR_IMAGE"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class UsageError(Exception):
    """argparse refused the command line (unknown flag, missing value); str() is one line."""


@attrs.frozen(kw_only=True)
class Settings:
    kubeconfig: str | None
    metrics_bind_address: str
    health_probe_bind_address: str
    leader_elect: bool
    metrics_secure: bool = False
    """/metrics over HTTPS, for callers the API server allows `get /metrics` only."""
    leader_election_namespace: str | None
    """Where the leader Lease lives; set whenever leader_elect is."""
    leader_election_id: str
    namespaces: tuple[str, ...]
    """The only namespaces whose ValkeyClusters are reconciled (empty: all)."""
    operator_namespace: str | None
    """The operator's own namespace, where valkey-operator-config is read (None: unknown, defaults)."""
    operator_pod_labels: tuple[tuple[str, str], ...] = ()
    """Labels of the operator's pods: clusters' NetworkPolicies admit those pods to the client port."""
    log_format: str
    log_level: str
    workers: dict[str, int]
    node_networks: tuple[Network, ...]
    cluster_domain: str
    backup_endpoint_allowed_networks: tuple[Network, ...] = ()
    """Networks within loopback and link-local a backup endpoint may still be at (none: all refused)."""
    operator_image: str = ""
    """This operator's own image: restoring pods run it as their init container (empty: unknown)."""
    exporter_image: str = ""
    """The metrics sidecar's image (empty: the operator's default, controllers/cluster/render/exporter.py)."""
    steady_probe_max_seconds: int = 300
    """The longest a quiet Active cluster goes unprobed (controllers/cluster/decision/cadence.py)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line instead of argparse's usage block."""
        raise UsageError(f"{message} (see --help)")


def parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="valkey-operator",
        description="Kubernetes operator for sharded Valkey clusters.",
        epilog="`valkey-operator selftest --help`: the check the Helm chart's `helm test` pod runs.",
    )
    parser.add_argument(
        "--kubeconfig",
        help="kubeconfig path (default: $KUBECONFIG, else in-cluster config, else ~/.kube/config)",
    )
    parser.add_argument(
        "--metrics-bind-address",
        default=":8080",
        help="Prometheus /metrics address: host:port, :port, [IP]:port (IPv6 or IPv4), or 0 to disable "
        "(default :8080)",
    )
    parser.add_argument(
        "--metrics-secure",
        action="store_true",
        help="serve /metrics over HTTPS (a self-signed certificate) to callers whose bearer token the API "
        "server authenticates and allows `get` on the /metrics URL (TokenReview, SubjectAccessReview)",
    )
    parser.add_argument(
        "--health-probe-bind-address",
        default=":8081",
        help="/healthz and /readyz address, same forms; not the metrics port (default :8081)",
    )
    parser.add_argument("--leader-elect", action="store_true", help="elect a leader so only one replica acts")
    parser.add_argument(
        "--leader-election-namespace",
        help="namespace of the leader Lease (default: the operator's own namespace)",
    )
    parser.add_argument(
        "--leader-election-id", default="valkey-operator-leader", help="name of the leader Lease"
    )
    parser.add_argument(
        "--namespace",
        help="reconcile ValkeyClusters in these namespaces only, comma-separated (default: all)",
    )
    parser.add_argument(
        "--operator-namespace",
        help=f"the operator's own namespace, where it reads the valkey-operator-config ConfigMap "
        f"(default: ${POD_NAMESPACE_ENV}, else the service account's namespace)",
    )
    parser.add_argument(
        "--operator-pod-labels",
        default="",
        help="labels of the operator's own pods, key=value comma-separated: each ValkeyCluster's "
        "NetworkPolicy admits those pods of the operator's namespace to the client port (default: "
        "every pod of that namespace; the Helm chart sets its pods' selector labels)",
    )
    parser.add_argument(
        "--log-format",
        default="console" if sys.stderr.isatty() else "json",
        help="json or console (default: console on a terminal, json otherwise)",
    )
    parser.add_argument("--log-level", default="info", help=f"{', '.join(LOG_LEVELS)} (default info)")
    for controller in CONTROLLERS:
        parser.add_argument(
            f"--{controller}-workers",
            default="4" if controller == "cluster" else "2",
            help=f"concurrent reconciles of the {controller} controller, >= 1",
        )
    parser.add_argument(
        "--node-networks",
        default=ANY_ADDRESS,
        help="comma-separated CIDRs the operator may dial Valkey nodes in (default: any address)",
    )
    parser.add_argument(
        "--backup-endpoint-allowed-networks",
        default="",
        help="comma-separated CIDRs within loopback (127.0.0.0/8, ::1) and link-local (169.254.0.0/16, "
        "fe80::/10) that a backup endpoint may still resolve to; elsewhere in those ranges it is refused "
        "(default: none)",
    )
    parser.add_argument(
        "--cluster-domain", default="cluster.local", help="the cluster's DNS domain, used in status.endpoint"
    )
    parser.add_argument(
        "--steady-probe-max-seconds",
        default="300",
        help="the longest a quiet Active cluster goes unprobed, >= 30; 30 turns the back-off off "
        "(default 300)",
    )
    parser.add_argument(
        "--operator-image",
        help=f"this operator's own image reference, which a restoring Valkey pod's init container runs "
        f"(default: ${OPERATOR_IMAGE_ENV}; the Helm chart sets it)",
    )
    parser.add_argument(
        "--exporter-image",
        help="the redis_exporter image of the metrics sidecar of ValkeyClusters with "
        "spec.metrics.exporter.enabled (default: oliver006/redis_exporter:v1.74.0)",
    )
    return parser


def parse(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    service_account_namespace: Path = SERVICE_ACCOUNT_NAMESPACE,
) -> Settings:
    """The validated settings; raises InvalidValue or UsageError (one line each)."""
    args = parser().parse_args(argv)
    environ = os.environ if environ is None else environ
    validation.distinct_ports(
        ("--metrics-bind-address", args.metrics_bind_address),
        ("--health-probe-bind-address", args.health_probe_bind_address),
    )
    own_namespace = operator_namespace(args.operator_namespace, environ, service_account_namespace)
    namespaces = () if args.namespace is None else _namespaces(args.namespace)
    return Settings(
        kubeconfig=_kubeconfig(args.kubeconfig),
        metrics_bind_address=args.metrics_bind_address,
        metrics_secure=args.metrics_secure,
        health_probe_bind_address=args.health_probe_bind_address,
        leader_elect=args.leader_elect,
        leader_election_namespace=_lease_namespace(args, own_namespace),
        leader_election_id=validation.dns1123_subdomain("--leader-election-id", args.leader_election_id),
        namespaces=namespaces,
        operator_namespace=own_namespace,
        operator_pod_labels=validation.labels("--operator-pod-labels", args.operator_pod_labels),
        log_format=validation.choice("--log-format", args.log_format, LOG_FORMATS),
        log_level=validation.choice("--log-level", args.log_level, LOG_LEVELS),
        workers={
            name: validation.integer(f"--{name}-workers", getattr(args, f"{name}_workers"), minimum=1)
            for name in CONTROLLERS
        },
        node_networks=validation.networks("--node-networks", args.node_networks),
        cluster_domain=validation.dns_name("--cluster-domain", args.cluster_domain),
        backup_endpoint_allowed_networks=(
            validation.networks("--backup-endpoint-allowed-networks", args.backup_endpoint_allowed_networks)
            if args.backup_endpoint_allowed_networks.strip()
            else ()
        ),
        operator_image=(args.operator_image or environ.get(OPERATOR_IMAGE_ENV) or "").strip(),
        exporter_image=(args.exporter_image or "").strip(),
        steady_probe_max_seconds=validation.integer(
            "--steady-probe-max-seconds", args.steady_probe_max_seconds, minimum=30
        ),
    )


def operator_namespace(flag: str | None, environ: Mapping[str, str], service_account: Path) -> str | None:
    """--operator-namespace, else $POD_NAMESPACE, else the mounted service account's namespace."""
    if flag is not None:
        return validation.dns1123_label("--operator-namespace", flag)
    if environ.get(POD_NAMESPACE_ENV):
        return validation.dns1123_label(POD_NAMESPACE_ENV, environ[POD_NAMESPACE_ENV])
    if service_account.is_file():
        return validation.dns1123_label(str(service_account), service_account.read_text().strip())
    return None


def _lease_namespace(args: argparse.Namespace, own_namespace: str | None) -> str | None:
    if args.leader_election_namespace is not None:
        return validation.dns1123_label("--leader-election-namespace", args.leader_election_namespace)
    if args.leader_elect and own_namespace is None:
        raise InvalidValue(
            "--leader-election-namespace",
            "",
            "a namespace: --leader-elect needs one when the operator's own namespace is unknown "
            f"(no --operator-namespace, ${POD_NAMESPACE_ENV} or service account)",
        )
    return own_namespace if args.leader_elect else None


def _kubeconfig(path: str | None) -> str | None:
    if path is not None and not Path(path).is_file():
        raise InvalidValue("--kubeconfig", path, "the path of an existing kubeconfig file")
    return path


def _namespaces(value: str) -> tuple[str, ...]:
    """--namespace: DNS-1123 labels, comma-separated, sorted and distinct."""
    names = value.split(",")
    if not all(len(name) <= 63 and validation.DNS1123_LABEL.fullmatch(name) for name in names):
        raise InvalidValue(
            "--namespace",
            value,
            "DNS-1123 labels (lowercase a-z, 0-9 and '-', alphanumeric at both ends, <= 63), comma-separated",
        )
    return tuple(sorted(set(names)))
