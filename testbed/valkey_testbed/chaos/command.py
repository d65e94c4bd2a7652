"""`python -m valkey_testbed chaos`: start (or reuse) a test bed, run the chaos in a fresh
namespace, print the timeline and a JSON summary; exit 1 on any violation.

It builds nothing (`python -m valkey_testbed build` does): a missing
binary or image is reported. Without --state-dir the control plane lives in a temporary directory and is
stopped at the end; with it, a running plane there is reused (and left
running), or one is started there and left running.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

from valkey_operator.core.client import Client
from valkey_operator.core.resource import NAMESPACES
from valkey_operator.core.rest import RestClient
from valkey_operator.core.restconfig import load_config
from valkey_testbed.chaos.run import Options, chaos
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.sessionbed import KUBELET_ARGS, NODES


def main(
    *,
    seed: int,
    minutes: float,
    state_dir: Path | None,
    tls: bool,
    json_path: Path | None,
    log_dir: Path | None,
    benchmark: bool,
) -> int:
    kept = state_dir is not None
    root = state_dir.resolve() if state_dir else Path(tempfile.mkdtemp(prefix="valkey-operator-chaos-"))
    plane = ControlPlane(root, nodes=NODES, kubelet_args=KUBELET_ARGS)
    plane.up()
    namespace = f"chaos-{seed}-{secrets.token_hex(3)}"
    logs = (log_dir or root / "chaos" / namespace).resolve()
    options = Options(seed=seed, minutes=minutes, log_dir=logs, tls=tls, benchmark=benchmark)
    try:
        summary = asyncio.run(_in_namespace(plane, namespace, options))
    finally:
        if not kept:
            plane.down()
            shutil.rmtree(root, ignore_errors=True)
    text = json.dumps(summary, indent=2)
    print(text)
    if json_path is not None:
        json_path.write_text(text + "\n")
    if summary["violations"]:
        for violation in summary["violations"]:
            print(
                f"VIOLATION {violation['invariant']} at step {violation['step']}: reproduce with "
                f"python -m valkey_testbed chaos --seed {seed} --minutes {minutes:g}"
            )
        return 1
    print(f"chaos: seed {seed}, {minutes:g} min: no invariant violated")
    return 0


async def _in_namespace(plane: ControlPlane, namespace: str, options: Options) -> dict[str, Any]:
    endpoints = plane.endpoints()
    assert endpoints is not None
    async with RestClient(await load_config(str(plane.kubeconfig))) as rest:
        kube = Client(rest, field_manager="chaos")
        await kube.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        try:
            return await chaos(
                plane.kubeconfig,
                endpoints.apiserver_port,
                KubeletControl(plane.state_dir),
                namespace,
                options,
                say=lambda line: print(line, flush=True),
            )
        finally:
            await kube.delete(NAMESPACES, namespace)
