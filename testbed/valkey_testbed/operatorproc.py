"""The operator as a separate process against a test-bed kubeconfig (benchmarks run it this way).

`start_operator` runs `python -m valkey_operator` with metrics and
probes on loopback ephemeral ports, JSON logs and `--node-networks=127.0.0.0/8`
(the test bed's pods have loopback IPs, and nothing here dials elsewhere), as a
`processes` record the caller stops by pid; from another checkout when given (an earlier
revision a benchmark measures beside this one).
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from collections.abc import Sequence
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


def from_checkout(checkout: Path | None) -> tuple[dict[str, str] | None, Path | None]:
    """The environment and working directory that make `python -m valkey_operator` run checkout's
    modules (None: this checkout's): checkout first on PYTHONPATH, and started in it, because
    `python -m` puts its working directory first on sys.path, before PYTHONPATH."""
    if checkout is None:
        return None, None
    return {**os.environ, "PYTHONPATH": str(checkout)}, checkout


def start_operator(
    kubeconfig: str,
    log_dir: Path,
    *,
    checkout: Path | None = None,
    argv: Sequence[str] | None = None,
    log_name: str = "operator.log",
) -> processes.ProcessRecord:
    """The operator as a process (argv: operator_argv(kubeconfig) unless given), from checkout when
    given (from_checkout), logging to log_dir/log_name."""
    env, cwd = from_checkout(checkout)
    command = list(argv) if argv is not None else operator_argv(kubeconfig)
    return processes.start("valkey-operator", command, log_dir / log_name, env, cwd=cwd)
