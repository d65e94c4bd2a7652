"""Keeping a running cluster as specified (pure): owned objects, runtime settings, ACLs, pod metadata.

Each step compares what the pass observed with what is desired and asks for the
smallest change; none is decided from a fact the pass could not read (a node
whose CONFIG GET or ACL LIST failed is left alone until it answers).

- Owned objects (Service, ConfigMap, internal Secret, PDBs, NetworkPolicy) are
  applied when the cached copy lacks a rendered field, or was applied from
  another rendering (the `rendered-hash` annotation): server-side apply then
  also removes the keys a new rendering dropped, since the operator's field
  manager owned them. One the spec no longer asks for (`Desired.retired`) is
  deleted if this cluster is its controller.
- Runtime settings: every runtime tunable a node does not run as desired is
  CONFIG SET in one call per node (docs/reference/valkeyconfig.md), except a
  value that node refused before (`Context.refusals`), which is reported
  instead; after a refusal that named no directive, one call per directive.
- ACLs: `ACL LIST` is the truth. Users whose rules differ from the rendering
  (compared in Valkey's normal form) are set again; users nobody asked for are
  deleted, never the internal ones. A spec user whose role names a command the
  nodes do not know is held: it keeps the rules it had in the startup ACL file
  (or is left out of it), so a new pod can always load the file.
- Pod metadata: spec.podAnnotations keys that are new or changed are patched
  onto live pods; removed keys stay until the pod is replaced.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from controllers.cluster.decision.actions import (
    ApplyObject,
    DeleteObject,
    Failure,
    PatchPodMetadata,
    SetConfig,
    SyncAcl,
)
from controllers.cluster.decision.desired import OwnedObject, object_key
from controllers.cluster.decision.memory import Refusals
from controllers.cluster.decision.view import Node, View
from controllers.shared.versions import meets_floor
from valkey_operator.api.resources import GROUP
from valkey_operator.core.rest import Obj

RENDERED_HASH_ANNOTATION = f"{GROUP}/rendered-hash"
"""On each owned object: the hash of the rendering last applied, so a dropped key is noticed."""


# --- owned objects -----------------------------------------------------------------------------


def contains(actual: Any, wanted: Any) -> bool:
    """Whether actual holds every field of wanted with the same value (lists compared item by item)."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(
            key in actual and contains(actual[key], value) for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(wanted)
            and all(contains(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def stamped(body: Obj) -> Obj:
    """The rendering with its own hash in the rendered-hash annotation."""
    encoded = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    metadata = dict(body["metadata"])
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        RENDERED_HASH_ANNOTATION: hashlib.sha256(encoded).hexdigest()[:16],
    }
    return {**body, "metadata": metadata}


def drifted(current: Obj | None, wanted: Obj) -> bool:
    """Missing, a rendered field changed on the server, or applied from another rendering."""
    if current is None:
        return True
    return not contains(current, {key: value for key, value in wanted.items() if key != "apiVersion"})


def apply_objects(view: View) -> Iterable[ApplyObject]:
    for owned in desired_objects(view):
        if drifted(view.objects.get(owned.key), owned.body):
            yield ApplyObject(owned)


def delete_objects(view: View) -> Iterable[DeleteObject]:
    """Retired objects that exist and whose controller is this cluster (another's stays)."""
    for resource, name in view.desired.retired:
        current = view.objects.get(object_key(resource.kind, name))
        if current is not None and controlled_by(current, view.desired.uid):
            yield DeleteObject(resource, name, current["metadata"]["uid"])


def controlled_by(obj: Obj, uid: str) -> bool:
    """Whether obj's controller ownerReference names uid."""
    references = obj.get("metadata", {}).get("ownerReferences") or []
    return bool(uid) and any(ref.get("controller") and ref.get("uid") == uid for ref in references)


def desired_objects(view: View) -> list[OwnedObject]:
    """The rendered objects, the internal Secret carrying the startup ACL file this pass decides."""
    acl = view.desired.acl
    objects = []
    for owned in view.desired.objects:
        body = owned.body
        if owned.resource.kind == "Secret" and body["metadata"]["name"] == acl.secret:
            text = view.acl.file_text
            body = {**body, "data": {**body.get("data", {}), acl.key: _b64(text)}}
        objects.append(OwnedObject(owned.resource, stamped(body)))
    return objects


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# --- runtime settings --------------------------------------------------------------------------


def config_changes(view: View, node: Node) -> Mapping[str, str] | None:
    """The directives to CONFIG SET on node (value as sent); None when its values are unknown.
    Computed once per pass (View.runtime_changes): the actions and the status both read it."""
    return view.runtime_changes[node.pod.name]


def set_config(view: View) -> Iterable[SetConfig]:
    """One CONFIG SET per node of what it does not run as desired, less the values it refused
    before; after a refusal that named no directive, one CONFIG SET per directive (Valkey applies
    a multi-directive CONFIG SET all or nothing), so the others apply and the refused is named."""
    for node in view.nodes.values():
        if not node.pod.deleting:
            yield from config_sets(node.pod.name, config_changes(view, node) or {}, view.context.refusals)


def config_sets(pod: str, changes: Mapping[str, str], refusals: Refusals) -> list[SetConfig]:
    """The CONFIG SETs to send pod for changes, given what it refused before (set_config)."""
    send = sorted((name, value) for name, value in changes.items() if refusals.of(pod, name, value) is None)
    if pod in refusals.unnamed:
        return [SetConfig(pod, (setting,)) for setting in send]
    return [SetConfig(pod, tuple(send))] if send else []


def standing_refusals(view: View) -> Iterable[Failure]:
    """Values the nodes refused before and are still desired: reported every pass, never resent."""
    refusals = view.context.refusals
    for node in view.nodes.values():
        if node.pod.deleting or node.pod.name not in refusals.named:
            continue
        for name, value in sorted((config_changes(view, node) or {}).items()):
            refusal = refusals.of(node.pod.name, name, value)
            if refusal is not None:
                yield Failure(SetConfig(node.pod.name, ((name, value),)), refusal.message, refused=name)


# --- ACLs --------------------------------------------------------------------------------------


def acl_changes(view: View, node: Node) -> SyncAcl | None:
    """The users to set and delete on node; None when its ACL is unknown or already right."""
    listed = node.obs.acl
    if listed is None or not meets_floor(node.obs.version) or not view.desired.acl.internal:
        return None  # unknown, a server that never joins, or no users known yet (no credentials)
    decision = view.acl
    wanted = {user.username: user for user in decision.users}
    set_users = tuple(user for name, user in wanted.items() if listed.get(name) != decision.forms[name])
    delete_users = tuple(
        sorted(name for name in listed if name not in wanted and name not in decision.protected)
    )
    if not set_users and not delete_users:
        return None
    return SyncAcl(node.pod.name, set_users=set_users, delete_users=delete_users)


def sync_acl(view: View) -> Iterable[SyncAcl]:
    for node in view.nodes.values():
        if node.pod.deleting:
            continue
        change = acl_changes(view, node)
        if change is not None:
            yield change


# --- pod metadata ------------------------------------------------------------------------------


def annotation_changes(wanted: Mapping[str, str], current: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in wanted.items() if current.get(key) != value}


def patch_metadata(view: View) -> Iterable[PatchPodMetadata]:
    for pod in view.pods:
        if not pod.live:
            continue
        changes = annotation_changes(view.desired.pod_annotations, pod.annotations)
        if changes:
            yield PatchPodMetadata(pod.name, pod.uid, tuple(sorted(changes.items())))
