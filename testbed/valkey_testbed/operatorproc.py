"""The operator as a separate process against a test-bed kubeconfig (benchmarks run it this way).

`start_operator` runs `python -m valkey_operator` with metrics and
probes on loopback ephemeral ports, JSON logs and `--node-networks=127.0.0.0/8`
(the test bed's pods have loopback IPs, and nothing here dials elsewhere), as a
`processes` record the caller stops by pid.
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from pathlib import Path

from valkey_operator.objectstore import EndpointPolicy
from valkey_testbed import processes
from valkey_testbed.build import binaries

NODE_NETWORKS = "127.0.0.0/8"
"""The only network the test bed's operator and tests dial (pods have loopback IPs)."""
LOOPBACK_NETWORKS = (ipaddress.ip_network(NODE_NETWORKS),)
"""NODE_NETWORKS parsed, for an in-process operator's options or a test's admin client."""
BACKUP_ENDPOINT_NETWORKS = "127.0.0.0/8"
"""The test bed's object store listens on 127.0.0.1, which the operator refuses as a backup endpoint
unless told: every test-bed operator allows it (--backup-endpoint-allowed-networks)."""
TEST_BED_ENDPOINTS = EndpointPolicy((ipaddress.ip_network(BACKUP_ENDPOINT_NETWORKS),))
"""BACKUP_ENDPOINT_NETWORKS as an in-process operator's options (or a test's open_store) take it."""


def kubectl(kubeconfig: str, *args: str) -> None:
    argv = [str(binaries().kubectl), f"--kubeconfig={kubeconfig}", *args]
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120)


def operator_argv(kubeconfig: str | Path, *flags: str, node_networks: str = NODE_NETWORKS) -> list[str]:
    """`python -m valkey_operator` against kubeconfig, metrics and probes on loopback ephemeral ports,
    JSON logs, dialling node_networks only, plus flags."""
    return [
        sys.executable,
        "-m",
        "valkey_operator",
        f"--kubeconfig={kubeconfig}",
        "--metrics-bind-address=127.0.0.1:0",
        "--health-probe-bind-address=127.0.0.1:0",
        "--log-format=json",
        f"--node-networks={node_networks}",
        f"--backup-endpoint-allowed-networks={BACKUP_ENDPOINT_NETWORKS}",
        *flags,
    ]


def start_operator(kubeconfig: str, log_dir: Path) -> processes.ProcessRecord:
    return processes.start("valkey-operator", operator_argv(kubeconfig), log_dir / "operator.log")
