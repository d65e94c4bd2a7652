"""The API server's audit log on the test bed: what service accounts asked for, and every pod deletion.

Tests use it to judge from the server's side what a client did: whether an
operator running under the chart's RBAC was ever refused a request, which of
its granted rules it used, and when a pod was deleted. The policy keeps the
log small: every request of a service account (the operator as the chart
installs it) and every pod deletion by anyone, at Metadata level (no bodies),
after the response.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import yaml

__all__ = ["POLICY", "AuditEvent", "events", "write_policy"]

POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
        {
            "level": "Metadata",
            "verbs": ["delete", "deletecollection"],
            "resources": [{"resources": ["pods"]}],
        },
        {"level": "None"},
    ],
}
MAX_SIZE_MB = 200
"""One file of at most this size and one rotated backup: ample for a test session."""


def write_policy(path: Path) -> None:
    path.write_text(yaml.safe_dump(POLICY, sort_keys=False))


def apiserver_flags(policy: Path, log: Path) -> list[str]:
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={log}",
        "--audit-log-format=json",
        f"--audit-log-maxsize={MAX_SIZE_MB}",
        "--audit-log-maxbackup=1",
    ]


@attrs.frozen
class AuditEvent:
    """One request as the API server recorded it after answering."""

    user: str
    verb: str
    group: str
    resource: str
    """With its subresource, as RBAC names it (pods/exec, valkeyclusters/status)."""
    namespace: str | None
    name: str | None
    code: int
    decision: str | None
    """The authorizer's answer: "allow" or "forbid" (None for requests not authorized, e.g. /healthz)."""
    received: str
    """requestReceivedTimestamp, RFC 3339 with microseconds (UTC): sorts as text."""
    uri: str

    @classmethod
    def of(cls, entry: dict[str, Any]) -> AuditEvent:
        ref = entry.get("objectRef") or {}
        resource = ref.get("resource") or ""
        if ref.get("subresource"):
            resource = f"{resource}/{ref['subresource']}"
        return cls(
            user=(entry.get("user") or {}).get("username", ""),
            verb=entry.get("verb", ""),
            group=ref.get("apiGroup") or "",
            resource=resource,
            namespace=ref.get("namespace"),
            name=ref.get("name"),
            code=int((entry.get("responseStatus") or {}).get("code") or 0),
            decision=(entry.get("annotations") or {}).get("authorization.k8s.io/decision"),
            received=entry.get("requestReceivedTimestamp", ""),
            uri=entry.get("requestURI", ""),
        )


def events(log: Path) -> Iterator[AuditEvent]:
    """Every recorded request, oldest first (the rotated backup, then the current file)."""
    backups = sorted(log.parent.glob(f"{log.stem}-*{log.suffix}"))
    for path in [*backups, log]:
        if not path.exists():
            continue
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield AuditEvent.of(json.loads(line))
