"""The Valkey pod (SPEC 1.4): one Valkey node, managed directly by the operator.

Choices, and why:
- Restart safety (SPEC 1.4): a node must never come back empty while still
  owning its slots (its replicas would then sync the empty dataset). See
  docs/cluster-internals.md "Restart safety":
  - restartPolicy Never. A crashed or OOM-killed container ends the pod (phase
    Failed); the operator replaces it with a new pod and a new node id, and
    the shard's replica is promoted instead.
  - nodes.conf (the node's id, epochs and slots) is on its own emptyDir with
    medium Memory (tmpfs), so it lives exactly as long as the in-memory data.
    A rebooted Kubernetes node may run its pods again even under
    restartPolicy Never (it is "at least once") and keeps their disk
    emptyDirs, but not their tmpfs: the container starts without its data
    and without its identity, gets a new node id and rejoins as a new node,
    while Valkey promotes the old node's replica.
  - No replication RDB is kept on the disk emptyDir (config.py), or a
    rebooted node would load stale data under a new identity.
- Readiness and liveness are tcpSocket probes on the pod IP. Valkey binds only
  $(POD_IP); an exec probe would need a shell to expand it, a valkey-cli in
  the image, credentials and TLS flags. Cluster health is the operator's
  business (it asks every node), not the kubelet's. Liveness is generous: a
  restart here means a replacement pod.
- terminationGracePeriodSeconds 60: longer than shutdown-timeout (10 s) plus
  the manual failover `shutdown-on-sigterm failover` runs on a primary.
- Restricted Pod Security Standard: non-root ids from the config's podSecurity,
  no privilege escalation, all capabilities dropped, RuntimeDefault seccomp,
  read-only root filesystem (Valkey writes only to its two emptyDirs).
- No service account token and no service links: Valkey talks to no API.
- Requests, and a memory limit; a CPU limit only when the config sets one
  (resources()).
"""

from __future__ import annotations

from controllers.cluster.render import archiver, exporter
from controllers.cluster.render.claims import claim_volume
from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.placement import scheduling
from controllers.cluster.render.security import READ_ONLY_MODE, container_security_context
from controllers.cluster.render.template import restarted_at, shape_hash, template_hash
from controllers.shared import layout, names
from controllers.shared.names import DATA_VOLUME
from valkey_operator.api.config import DEFAULT_POD_ID
from valkey_operator.api.resources import RESTARTED_AT_ANNOTATION
from valkey_operator.core.rest import Obj

TERMINATION_GRACE_PERIOD_S = 60
CLUSTER_STATE_SIZE_LIMIT = "4Mi"
"""Cap of the tmpfs holding nodes.conf. It holds a few KiB (a few hundred KiB for the largest
cluster with fragmented slots, twice that while Valkey rewrites it); tmpfs uses memory only for
what is written, and it counts against the pod's memory limit."""


def command() -> list[str]:
    """valkey-server with the shared file, plus what differs per pod ($(VAR) is expanded by the kubelet)."""
    return [
        "valkey-server",
        layout.CONFIG_FILE,
        "--bind",
        "$(POD_IP)",
        "--cluster-announce-ip",
        "$(POD_IP)",
        "--cluster-announce-human-nodename",
        "$(POD_NAME)",
    ]


def _env() -> list[Obj]:
    def field(name: str, path: str) -> Obj:
        return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}

    return [
        field("POD_IP", "status.podIP"),
        field("POD_NAME", "metadata.name"),
        field("POD_NAMESPACE", "metadata.namespace"),
    ]


def _probes() -> dict[str, Obj]:
    socket = {"tcpSocket": {"port": "valkey"}}
    return {
        "readinessProbe": {**socket, "periodSeconds": 2, "timeoutSeconds": 2, "failureThreshold": 3},
        "livenessProbe": {
            **socket,
            "initialDelaySeconds": 15,
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 6,
        },
    }


def resources(ctx: RenderContext) -> Obj:
    """cpu and memory are requests; the memory limit defaults to the memory request and there is no
    CPU limit unless limits.cpu is set (SPEC 1.9): a CPU limit throttles a latency-sensitive server
    (CFS quota), while a memory limit bounds what maxmemory is derived from."""
    config = ctx.config
    requests = {key: config.resources[key] for key in ("cpu", "memory") if key in config.resources}
    limits = {key: config.limits[key] for key in ("cpu",) if key in config.limits}
    memory_limit = config.memory_limit
    if memory_limit is not None:
        limits["memory"] = memory_limit
    rendered: Obj = {}
    if requests:
        rendered["requests"] = requests
    if limits:
        rendered["limits"] = limits
    return rendered


def pod_security_context(ctx: RenderContext) -> Obj:
    ids = ctx.config.pod_security
    return {
        "runAsNonRoot": True,
        "runAsUser": ids.get("runAsUser", DEFAULT_POD_ID),
        "runAsGroup": ids.get("runAsGroup", DEFAULT_POD_ID),
        "fsGroup": ids.get("fsGroup", DEFAULT_POD_ID),
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _secret_volume(name: str, secret: str, keys: list[str]) -> Obj:
    items = [{"key": key, "path": key} for key in keys]
    return {"name": name, "secret": {"secretName": secret, "defaultMode": READ_ONLY_MODE, "items": items}}


def volumes(ctx: RenderContext, claim: str | None = None) -> tuple[list[Obj], list[Obj]]:
    """(volumes, volumeMounts). The internal Secret is mounted without the admin password.

    With a claim (persistence), data and nodes.conf are both on it (claims.py); without one, the
    data is on a disk emptyDir and nodes.conf on a tmpfs of its own (module docstring)."""
    state: list[Obj] = []
    state_mounts: list[Obj] = []
    if claim is None:
        # tmpfs: nodes.conf (a few KiB) must not outlive the in-memory dataset (module docstring).
        state = [
            {"name": "cluster-state", "emptyDir": {"medium": "Memory", "sizeLimit": CLUSTER_STATE_SIZE_LIMIT}}
        ]
        state_mounts = [{"name": "cluster-state", "mountPath": layout.CLUSTER_STATE_DIR}]
    vols: list[Obj] = [
        claim_volume(claim) if claim is not None else {"name": DATA_VOLUME, "emptyDir": {}},
        *state,
        {
            "name": "config",
            "configMap": {
                "name": names.config_map_name(ctx.name),
                "defaultMode": READ_ONLY_MODE,
                "items": [{"key": layout.CONFIG_KEY, "path": layout.CONFIG_KEY}],
            },
        },
        _secret_volume(
            "internal", names.secret_name(ctx.name), [layout.ACL_KEY, layout.REPLICATION_AUTH_KEY]
        ),
    ]
    mounts: list[Obj] = [
        {"name": DATA_VOLUME, "mountPath": layout.DATA_DIR},
        *state_mounts,
        {"name": "config", "mountPath": layout.CONFIG_DIR, "readOnly": True},
        {"name": "internal", "mountPath": layout.INTERNAL_DIR, "readOnly": True},
    ]
    if ctx.tls_secret is not None:
        keys = [layout.TLS_CERT_KEY, layout.TLS_KEY_KEY, layout.TLS_CA_KEY]
        vols.append(_secret_volume("tls", ctx.tls_secret, keys))
        mounts.append({"name": "tls", "mountPath": layout.TLS_DIR, "readOnly": True})
    return vols, mounts


def container(ctx: RenderContext, claim: str | None = None) -> Obj:
    _, mounts = volumes(ctx, claim)
    spec: Obj = {
        "name": layout.CONTAINER_NAME,
        "image": ctx.config.image.reference,
        "imagePullPolicy": "IfNotPresent",
        # A server that rejects its config (e.g. a binary below the floor) says why, and which version it is.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "command": command(),
        "env": _env(),
        "ports": [
            {"name": "valkey", "containerPort": layout.VALKEY_PORT, "protocol": "TCP"},
            {"name": "cluster-bus", "containerPort": layout.CLUSTER_BUS_PORT, "protocol": "TCP"},
        ],
        **_probes(),
        "securityContext": container_security_context(),
        "volumeMounts": mounts,
    }
    limits = resources(ctx)
    if limits:
        spec["resources"] = limits
    return spec


def image_pull_secrets(ctx: RenderContext) -> Obj:
    """spec.imagePullSecrets from the cluster's (SPEC 1.9); absent when it names none."""
    secrets = ctx.cluster.spec.image_pull_secrets
    return {"imagePullSecrets": [{"name": name} for name in secrets]} if secrets else {}


def render_pod(ctx: RenderContext, shard: int, name: str, claim: str | None = None) -> Obj:
    """A new pod for `shard` named `name` (from names.pod_name), on `claim` when the config asks for
    persistence; labels carry the template hash and the shape hash (template.py)."""
    labels = names.pod_labels(ctx.name, shard, template_hash(ctx), name, shape_hash(ctx))
    metadata = ctx.metadata(name, labels)
    annotations = dict(ctx.cluster.spec.pod_annotations)
    restart = restarted_at(ctx)
    if restart is not None:
        annotations[RESTARTED_AT_ANNOTATION] = restart  # what the pod was created for, as a Deployment's
    if annotations:
        metadata["annotations"] = annotations
    vols, _ = volumes(ctx, claim)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "hostname": name,
            "subdomain": names.service_name(ctx.name),
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": TERMINATION_GRACE_PERIOD_S,
            "securityContext": pod_security_context(ctx),
            **image_pull_secrets(ctx),
            "containers": [container(ctx, claim)],
            "volumes": vols,
            **scheduling(ctx, shard),
        },
    }
    return archiver.with_sidecar(ctx, exporter.with_sidecar(ctx, pod))
