"""Start, await and stop the kubelet process for `ControlPlane` (the `up`/`down` commands)."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from valkey_testbed import processes
from valkey_testbed.kubelet import podprocs
from valkey_testbed.kubelet.kubelet import kubelet_dir, node_names

NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def start(state_dir: Path, nodes: int, args: Sequence[str], log_file: Path) -> processes.ProcessRecord:
    argv = [sys.executable, "-m", "valkey_testbed.kubelet", "--state-dir", str(state_dir)]
    return processes.start("kubelet", [*argv, "--nodes", str(nodes), *args], log_file)


def nodes_ready(get: Callable[[str], tuple[int, str]], nodes: int) -> bool:
    """True once each of our nodes is Ready and the not-ready taint is gone (pods can be scheduled)."""
    try:
        status, body = get("/api/v1/nodes")
    except OSError:
        return False
    if status != 200:
        return False
    wanted = set(node_names(nodes))
    ready = set()
    for node in json.loads(body).get("items", []):
        conditions = node.get("status", {}).get("conditions") or []
        taints = node.get("spec", {}).get("taints") or []
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) and not any(
            t.get("key") == NOT_READY_TAINT for t in taints
        ):
            ready.add(node["metadata"]["name"])
    return wanted <= ready


def stop(state_dir: Path, record: processes.ProcessRecord | None) -> None:
    """Stop the kubelet, then every pod process it recorded (by pid), then drop pod directories."""
    if record is not None:
        processes.stop([record])
    directory = kubelet_dir(state_dir)
    podprocs.sweep(directory)
    shutil.rmtree(directory / "pods", ignore_errors=True)
