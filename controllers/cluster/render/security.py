"""The hardening every container of a Valkey pod shares: Valkey, a restore's loader, the sidecars.

Its own module because pods.py assembles the pod from the sidecar (exporter.py) and the sidecar
needs the same hardening: a module both import keeps render/ free of import loops.
"""

from __future__ import annotations

from valkey_operator.core.rest import Obj

READ_ONLY_MODE = 0o440
"""Secrets and config readable by the pod's user and fsGroup, by nobody else."""


def container_security_context() -> Obj:
    return {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
