"""What only a human can unblock (pure): those reasons set Stalled=True, which kstatus reads as Failed.

GitOps tools (Flux, Argo CD, kpt) wait on kstatus: InProgress until their timeout, Failed at once.
A cluster that no pass of the operator can move forward, whatever it retries, says so at once,
with what a human must do: Stalled=True with the reason, the message ending in that advice.

Stalled stays False for what a user's next apply of another object may fix in due course (a
ValkeyConfig, ValkeyImage, ValkeyRole, Secret or ValkeyBackup not yet created or not yet
completed): GitOps tools apply objects in any order, and those arrive on their own. It also stays
False for what the operator retries and that may heal (an unreachable node or store, a quota, a pod
that crashed: PodsFailing retries after its window).

Human-only, by where it is seen:
- blocked before anything is planned (BLOCKED): the operator's own flags (RestoreImageUnknown, and
  EndpointRefused: a backup endpoint at a loopback or link-local address the flags do not allow), a
  backup that ended Failed (final: spec.restore is set at creation, and a ValkeyBackup never runs
  again), a Completed backup that names no manifest, a manifest format this operator version
  cannot read, an internal Secret someone damaged (never regenerated: live nodes know the old
  passwords), an object of one of the cluster's names that someone else controls (NameConflict:
  never taken over, conflicts.py), a restore to a moment the archive does not hold (it begins
  later, or no base is that old) or into a cluster without append-only files;
- findings of a planning pass (FINDINGS): the API server's authorizer refused an action (RBAC:
  only a change of the operator's Role can allow it), and a pod's image that the kubelet cannot
  pull for IMAGE_PULL_BOUND seconds or cannot even parse.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from controllers.shared.observation import PULL_ERRORS, PULL_NEVER

RESTORE_IMAGE_UNKNOWN = "RestoreImageUnknown"
BACKUP_FAILED = "BackupFailed"
MANIFEST_MISSING = "ManifestMissing"
MANIFEST_UNSUPPORTED = "ManifestUnsupported"
INTERNAL_SECRET_DAMAGED = "InternalSecretDamaged"
ENDPOINT_REFUSED = "EndpointRefused"
FORBIDDEN = "Forbidden"
IMAGE_PULL_FAILED = "ImagePullFailed"
NAME_CONFLICT = "NameConflict"
NO_ARCHIVE_AT_MOMENT = "NoArchiveAtMoment"
NO_BASE_BEFORE_MOMENT = "NoBaseBeforeMoment"
NEEDS_APPEND_ONLY = "NeedsAppendOnly"

BLOCKED: Mapping[str, str] = {
    NO_ARCHIVE_AT_MOMENT: "the archive begins after spec.restore.pointInTime and never will before "
    "it: delete this cluster and create it again with a later moment",
    NO_BASE_BEFORE_MOMENT: "no history in the archive starts at or before spec.restore.pointInTime "
    "(retention deleted it, or the moment precedes archiving): delete this cluster and create it "
    "again with a later moment",
    NEEDS_APPEND_ONLY: "a restore to a moment loads append-only files: give the cluster a "
    "ValkeyConfig with spec.persistence.mode aof",
    RESTORE_IMAGE_UNKNOWN: "restart the operator with --operator-image set to its own image "
    "(the Helm chart sets it; VALKEY_OPERATOR_IMAGE in its environment works too)",
    BACKUP_FAILED: "a Failed backup never completes: delete this cluster and create it again with "
    "spec.restore naming a Completed ValkeyBackup",
    MANIFEST_MISSING: "a Completed backup that names no manifest never will: delete this cluster and "
    "create it again with spec.restore naming another backup",
    MANIFEST_UNSUPPORTED: "run an operator version that reads this manifest format, or restore from "
    "another backup (delete and recreate the cluster)",
    ENDPOINT_REFUSED: "the backup's endpoint resolves to a loopback or link-local address, which the "
    "operator refuses: restore a backup stored elsewhere (delete and recreate the cluster), or, if the "
    "store really listens there, allow that network with --backup-endpoint-allowed-networks (chart "
    "value backupEndpointAllowedNetworks)",
    INTERNAL_SECRET_DAMAGED: "restore the Secret's passwords, or delete the Secret and the cluster's "
    "pods to start over (their data is lost unless persisted)",
    NAME_CONFLICT: "delete that object (or hand it over: make this ValkeyCluster its controller "
    "ownerReference), or create the cluster under another name; the cluster goes on by itself once "
    "no object of its names belongs to someone else",
}
"""Block reasons only a human can lift -> what that human must do."""

FINDINGS: Mapping[str, str] = {
    FORBIDDEN: "grant the operator's ServiceAccount that permission (the chart's Role or ClusterRole); "
    "the operator retries each pass",
    IMAGE_PULL_FAILED: "make the image pullable: fix the ValkeyImage's reference, the registry, or "
    "its pull Secret; the kubelet keeps retrying",
}
"""Findings of a planning pass only a human can clear -> what that human must do."""

IMAGE_PULL_BOUND = 300.0
"""Seconds from a pod's creation after which a pull that keeps failing is human-only. The kubelet
backs off from 10 s doubling to 300 s, so by then it has tried five times; a registry that
hiccupped once has recovered, one that refuses the reference or the credentials has not."""

_AUTHORIZER_DENIAL = re.compile(r"\bcannot [a-z]+ resource \"")
"""The authorizer's words in a 403 (`User "x" cannot create resource "pods" in API group ""...`):
a 403 from an admission plugin (quota, PodSecurity, a webhook, a terminating namespace) reads
otherwise and is not an RBAC refusal."""


def rbac_denied(status: int, message: str) -> bool:
    """A 403 from the API server's authorizer: the request itself is not allowed (RBAC)."""
    return status == 403 and _AUTHORIZER_DENIAL.search(message) is not None


def blocked_advice(reason: str) -> str | None:
    """What a human must do about a cluster blocked for reason; None when it may lift by itself."""
    return BLOCKED.get(reason)


def finding_advice(reason: str) -> str | None:
    """What a human must do about a finding of this reason; None when the operator may clear it."""
    return FINDINGS.get(reason)


def pull_stuck(waiting: str, created_at: float | None, now: float) -> bool:
    """A container waiting for its image with this reason is human-only (see IMAGE_PULL_BOUND)."""
    if waiting in PULL_NEVER:
        return True
    return waiting in PULL_ERRORS and created_at is not None and now - created_at >= IMAGE_PULL_BOUND
