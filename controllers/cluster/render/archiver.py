"""The archiver sidecar (spec.backup.pointInTime): ships its node's append-only history to the bucket.

Choices, and why:
- In the Valkey pod, reading the data volume: the history is the node's own AOF, so the operator
  stays out of the data path (docs/backups.md "Point-in-time recovery"); the operator only reads
  each node's progress.json (../archive_progress.py). The volume is mounted read-only: the
  archiver never writes beside valkey-server.
- Only with persistence aof: the AOF is the history, and a node without one has none to ship.
  `aof-timestamp-enabled yes` is then written into valkey.conf (config.py) so that a restore can
  cut the history at a second.
- A native sidecar (an init container with restartPolicy Always), as the exporter: the pod is
  restartPolicy Never; the sidecar stops after valkey-server does, and its SIGTERM ships what the
  server wrote last before it exits.
- The operator's own image (`valkey-operator archive`), as a restore's init container: the Valkey
  image has no S3 client. The image is not in the template hash (template.py): an operator upgrade
  rolls no pod; pods created later run the new archiver.
- S3 credentials from the destination's Secret as environment variables, never arguments; the CA,
  when the destination names one, a read-only mount. The endpoint policy is the operator's own
  (--backup-endpoint-allowed-networks): a loopback or link-local endpoint only within it.
- Requests and limits from the measured footprint (docs/backups.md).
"""

from __future__ import annotations

from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.security import READ_ONLY_MODE, container_security_context
from controllers.shared import layout
from controllers.shared.names import DATA_VOLUME
from controllers.shared.storage import destination_of
from valkey_operator.api.backup import BackupDestination
from valkey_operator.api.cluster import ValkeyCluster
from valkey_operator.api.config import PersistenceMode
from valkey_operator.api.destination_keys import CA_KEY, CREDENTIAL_KEYS
from valkey_operator.core.rest import Obj

CONTAINER_NAME = "archiver"
COMMAND = "archive"
CA_VOLUME = "archive-ca"
CA_DIR = "/etc/valkey-archive"
TIMESTAMPS = ("aof-timestamp-enabled", "yes")
"""The directive that makes the AOF cuttable at a second (valkey-check-aof --truncate-to-timestamp)."""

RESOURCES: Obj = {
    "requests": {"cpu": "20m", "memory": "64Mi"},
    "limits": {"memory": "128Mi"},
}


def asked(ctx: RenderContext) -> bool:
    """spec.backup.pointInTime is set."""
    backup = ctx.cluster.spec.backup
    return backup is not None and backup.point_in_time is not None


def enabled(ctx: RenderContext) -> bool:
    """Whether the pods carry the archiver: asked for, on an AOF, with the operator's image known."""
    return runs(ctx.cluster, ctx.persistence.mode, ctx.operator_image)


def runs(cluster: ValkeyCluster, mode: PersistenceMode, operator_image: str) -> bool:
    """enabled() before a RenderContext exists (the gatherer: no archive to read otherwise)."""
    backup = cluster.spec.backup
    asked_for = backup is not None and backup.point_in_time is not None
    return asked_for and mode is PersistenceMode.AOF and bool(operator_image)


def _destination(ctx: RenderContext) -> BackupDestination:
    backup = ctx.cluster.spec.backup
    assert backup is not None
    return backup.destination


def template_inputs(ctx: RenderContext) -> Obj:
    """What of archiving only new pods can change: its presence and where it ships (the sidecar's
    arguments and volumes); empty when off, so other clusters keep their hash."""
    if not enabled(ctx):
        return {}
    destination = _destination(ctx)
    return {"archive": {"destination": destination.to_dict()}}


def container(ctx: RenderContext) -> Obj:
    destination = _destination(ctx)
    where = destination_of(destination.to_dict())
    args = [
        COMMAND,
        "--dir",
        layout.DATA_DIR,
        "--endpoint",
        where.endpoint,
        "--bucket",
        where.bucket,
        "--region",
        where.region,
        *(["--path", where.path] if where.path else []),
        "--namespace",
        ctx.namespace,
        "--cluster",
        ctx.name,
    ]
    if ctx.endpoint_networks:
        args += ["--endpoint-allowed-networks", ",".join(ctx.endpoint_networks)]
    mounts: list[Obj] = [{"name": DATA_VOLUME, "mountPath": layout.DATA_DIR, "readOnly": True}]
    if destination.ca_secret_name:
        args += ["--ca-file", f"{CA_DIR}/{CA_KEY}"]
        mounts.append({"name": CA_VOLUME, "mountPath": CA_DIR, "readOnly": True})
    secret = destination.credentials_secret_name
    return {
        "name": CONTAINER_NAME,
        "image": ctx.operator_image,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "command": ["valkey-operator"],
        "args": args,
        "env": [
            {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": name}}}
            for name in CREDENTIAL_KEYS
        ],
        "securityContext": container_security_context(),
        "resources": RESOURCES,
        "volumeMounts": mounts,
    }


def with_sidecar(ctx: RenderContext, pod: Obj) -> Obj:
    """pod with the archiver appended to its init containers (after a restore's loader, so the
    restored base is in place before it looks) and the CA volume it reads, when enabled."""
    if not enabled(ctx):
        return pod
    spec = pod["spec"]
    volumes = list(spec["volumes"])
    ca = _destination(ctx).ca_secret_name
    if ca:
        items = [{"key": CA_KEY, "path": CA_KEY}]
        volumes.append(
            {"name": CA_VOLUME, "secret": {"secretName": ca, "defaultMode": READ_ONLY_MODE, "items": items}}
        )
    return {
        **pod,
        "spec": {
            **spec,
            "initContainers": [*spec.get("initContainers", []), container(ctx)],
            "volumes": volumes,
        },
    }
