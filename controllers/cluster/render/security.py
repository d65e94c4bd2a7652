"""The hardening every container of a Valkey pod shares: Valkey, a restore's loader, the exporter.

Its own module because pods.py assembles the pod from the sidecar (exporter.py) and the sidecar
needs the same hardening: a module both import keeps render/ free of import loops.
"""

from __future__ import annotations

from valkey_operator.core.rest import Obj


def container_security_context() -> Obj:
    return {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
