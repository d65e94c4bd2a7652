"""Names and labels of the objects a ValkeyCluster owns.

Pods are named `{cluster}-{shard}-{suffix}` with a fresh random suffix per
incarnation (SPEC 1.4), so a replaced pod never reuses a dead node's name,
DNS record or Valkey identity. The cluster name is at most 50 characters
(admission), which keeps pod names within the 63 characters a hostname allows.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping

from valkey_operator.api.resources import CLIENT_SERVICE_SUFFIX, GROUP, INTERNAL_SECRET_SUFFIX

APP_NAME = "valkey"
MANAGER = "valkey-operator"

NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
CLUSTER_LABEL = f"{GROUP}/cluster"
SHARD_LABEL = f"{GROUP}/shard"
TEMPLATE_HASH_LABEL = f"{GROUP}/template-hash"
"""Hash of what a change must roll (see template.py); the planner compares it, pod by pod."""
SHAPE_HASH_LABEL = f"{GROUP}/shape-hash"
"""Hash of the template without the container's resources (template.shape_hash): a pod whose shape
is current and whose template is not differs only in resources, which pods/resize changes in place."""
MEMBER_LABEL = f"{GROUP}/member"
""""true" on a pod whose node is a cluster member that serves (membership.py); the client Service
selects it, so clients are never handed a node that has not joined or is leaving."""
MEMBER = "true"
POD_NAME_LABEL = f"{GROUP}/pod-name"
"""The pod's own name, as a label: its external Service (spec.externalAccess) selects it. Not part
of the template hash; older pods get it patched on when external access is on."""
NODE_ID_ANNOTATION = f"{GROUP}/node-id"
"""On a data claim: the Valkey node id last reported by a server running on it (render/claims.py)."""
MODE_ANNOTATION = f"{GROUP}/persistence-mode"
"""On a data claim: the persistence mode its files were written in: a server in the other mode would
not read them (an rdb claim started with aof comes back empty under its old node id and slots)."""
DATA_VOLUME = "data"
"""The pod volume that holds the data directory (a claim with persistence, else an emptyDir)."""

SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""Kubernetes' own generateName alphabet: lowercase alphanumerics without vowels or look-alikes."""
SUFFIX_LENGTH = 5


def service_name(cluster: str) -> str:
    """The peer Service: every pod's DNS name via hostname/subdomain, ready or not."""
    return cluster


def client_service_name(cluster: str) -> str:
    """The client Service (`status.endpoint`): resolves only to member pods that serve."""
    return f"{cluster}-{CLIENT_SERVICE_SUFFIX}"


def config_map_name(cluster: str) -> str:
    return f"{cluster}-config"


def secret_name(cluster: str) -> str:
    return f"{cluster}-{INTERNAL_SECRET_SUFFIX}"


def network_policy_name(cluster: str) -> str:
    """The cluster's NetworkPolicy (render/network_policy.py)."""
    return cluster


def pdb_name(cluster: str, shard: int) -> str:
    return f"{cluster}-{shard}"


def cluster_candidates(name: str) -> list[str]:
    """The cluster names an object of this name could belong to: itself (the peer Service) and
    every prefix before a '-' (`<cluster>-<suffix>`: every other name the operator writes). An event
    on such an object requeues those clusters, so one blocked by a NameConflict goes on at once
    when the object is deleted."""
    return [name] + [name[:i] for i, char in enumerate(name) if char == "-" and i > 0]


def pod_name(cluster: str, shard: int, rng: random.Random, taken: Collection[str] = ()) -> str:
    """A name for a new incarnation of a pod in `shard`, distinct from every name in `taken`.

    `rng` is injected so tests are deterministic; production passes random.SystemRandom().
    """
    while True:
        suffix = "".join(rng.choice(SUFFIX_ALPHABET) for _ in range(SUFFIX_LENGTH))
        name = f"{cluster}-{shard}-{suffix}"
        if name not in taken:
            return name


def cluster_selector(cluster: str) -> dict[str, str]:
    """Matches every Valkey pod of the cluster (the Service's selector)."""
    return {NAME_LABEL: APP_NAME, CLUSTER_LABEL: cluster}


def client_selector(cluster: str) -> dict[str, str]:
    """Matches the cluster's pods the operator marked as serving members (the client Service)."""
    return {**cluster_selector(cluster), MEMBER_LABEL: MEMBER}


def shard_selector(cluster: str, shard: int) -> dict[str, str]:
    """Matches the pods of one shard (its PDB and spread constraints)."""
    return {**cluster_selector(cluster), SHARD_LABEL: str(shard)}


def common_labels(cluster: str) -> dict[str, str]:
    """Labels on every owned object, so `kubectl get all -l` finds them."""
    return {
        NAME_LABEL: APP_NAME,
        INSTANCE_LABEL: cluster,
        MANAGED_BY_LABEL: MANAGER,
        CLUSTER_LABEL: cluster,
    }


def pod_labels(
    cluster: str, shard: int, template_hash: str, pod: str, shape_hash: str | None = None
) -> dict[str, str]:
    return {
        **common_labels(cluster),
        SHARD_LABEL: str(shard),
        TEMPLATE_HASH_LABEL: template_hash,
        **({SHAPE_HASH_LABEL: shape_hash} if shape_hash is not None else {}),
        POD_NAME_LABEL: pod,
    }


def claim_labels(cluster: str, shard: int) -> dict[str, str]:
    """A data claim's labels: found by cluster and shard, also without an owner (reclaimPolicy Retain)."""
    return {**common_labels(cluster), SHARD_LABEL: str(shard)}


def shard_of(labels: Mapping[str, str]) -> int | None:
    """The shard index a pod's labels claim, or None when absent or malformed."""
    value = labels.get(SHARD_LABEL)
    if value is None or not (value.isascii() and value.isdigit()):
        return None
    return int(value)
