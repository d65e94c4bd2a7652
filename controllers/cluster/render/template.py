"""The pod-template hash: what a change must roll pods for, and nothing else (SPEC 1.4, SPEC 5).

The planner reads progress from the world by comparing each pod's
`valkey.gomomento.com/template-hash` label with `template_hash(ctx)`.

In the hash: the image (reference, so a digest too, and declared version), resources
(requests; limits only when the config sets any, so clusters without them kept their hash when
the CPU limit stopped being derived from the request: their live pods keep the CPU limit they were
created with until something else rolls them), pod
security ids, the startup-only tunables (io-threads), TLS (on/off and the Secret the pods mount),
placement (zones, nodeSelector, tolerations, priorityClassName: fields of a
live pod that cannot change in place), persistence when it is on (its mode,
appendfsync and storageClassName: a mode change changes valkey.conf and the
pod's volumes, and a claim's class cannot change, so a new class needs new
claims), the metrics sidecar when it is on (its image: a sidecar cannot be added to or removed from a live
pod; render/exporter.py), the archiver when it runs (where it ships; not its image, the operator's:
an operator upgrade rolls nothing; render/archiver.py), the cluster's
`valkey.gomomento.com/restartedAt` annotation when it is set (a new value rolls every pod, as
`kubectl rollout restart` does; absent, the inputs are what they were before it existed, so no
cluster rolls when the operator is upgraded), and TEMPLATE_VERSION.

Not in the hash: runtime tunables (CONFIG SET on live nodes, SPEC 1.2; removing
one sets it back to its default the same way),
podAnnotations (patched in place) and zoneSpread (applies to pods created
later), as SPEC 1.4 requires; nor ACLs (ACL SETUSER at runtime); nor the persistence size (claims grow in
place, SPEC 1.6) or reclaimPolicy (the claims' owner references); nor
imagePullSecrets: the kubelet uses them only to pull, and a running pod has
pulled its image already, so a change (a renamed or rotated registry
credential) needs no new pods; pods created later carry the new list.

The shape hash (`shape_hash`) is the same inputs without resources and limits: pods carry it as a
second label, and a live pod whose shape is current while its template is not differs only in its
container's resources, which the pods/resize subresource changes without a new pod (rollout.py,
resize.py). The template hash itself is unchanged by it, so no pod made before it rolls.
"""

from __future__ import annotations

import hashlib
import json

from controllers.cluster.render import archiver, exporter
from controllers.cluster.render import config as conf
from controllers.cluster.render.context import RenderContext
from valkey_operator.api.resources import RESTARTED_AT_ANNOTATION
from valkey_operator.core.rest import Obj

TEMPLATE_VERSION = 2
"""Bump when the rendered pod changes shape in a way live pods must be replaced for.

2: nodes.conf moved to a tmpfs emptyDir (restart safety); a pod of version 1
keeps it on disk and, after the ConfigMap change, could not even start again.
"""


def persistence_inputs(ctx: RenderContext) -> Obj:
    """What of persistence only new pods can change; empty with mode none, so caches keep their hash."""
    persistence = ctx.persistence
    if not persistence.enabled:
        return {}
    return {
        "persistence": {
            "mode": str(persistence.mode),
            "appendfsync": str(persistence.appendfsync) if persistence.appendfsync else None,
            "storageClassName": persistence.storage_class_name,
        }
    }


def restarted_at(ctx: RenderContext) -> str | None:
    """The restart request on the cluster (None when absent or empty)."""
    return ctx.cluster.metadata.annotations.get(RESTARTED_AT_ANNOTATION) or None


def template_inputs(ctx: RenderContext) -> Obj:
    """Everything the hash covers, as plain JSON (also handy for explaining a rollout)."""
    image = ctx.config.image
    placement = ctx.placement
    restart = restarted_at(ctx)
    return {
        **persistence_inputs(ctx),
        **exporter.template_inputs(ctx),
        **archiver.template_inputs(ctx),
        **({"restartedAt": restart} if restart is not None else {}),
        "version": TEMPLATE_VERSION,
        "image": {"reference": image.reference, "version": image.version},
        "resources": dict(sorted(ctx.config.resources.items())),
        **({"limits": dict(sorted(ctx.config.limits.items()))} if ctx.config.limits else {}),
        "podSecurity": dict(sorted(ctx.config.pod_security.items())),
        "startupSettings": conf.startup_settings(ctx.config),
        "tls": ctx.tls_secret,
        "placement": {
            "zones": sorted(set(placement.zones)),
            "nodeSelector": dict(sorted(placement.node_selector.items())),
            "tolerations": [toleration.to_dict() for toleration in placement.tolerations],
            "priorityClassName": placement.priority_class_name,
        },
    }


RESIZABLE_INPUTS = ("resources", "limits")
"""The inputs a live pod can take in place (pods/resize): left out of the shape hash."""


def shape_inputs(ctx: RenderContext) -> Obj:
    """The template's inputs but the ones a resize changes in place."""
    return {key: value for key, value in template_inputs(ctx).items() if key not in RESIZABLE_INPUTS}


def _digest(inputs: Obj) -> str:
    encoded = json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def template_hash(ctx: RenderContext) -> str:
    """16 hex characters: a valid label value, short enough to read in `kubectl get pods -L`."""
    return _digest(template_inputs(ctx))


def shape_hash(ctx: RenderContext) -> str:
    """The template hash's form without resources and limits (16 hex characters)."""
    return _digest(shape_inputs(ctx))
