"""TLS certificate rotation (pure): which nodes reload their certificate files, and when.

The kubelet updates a pod's mounted Secret files some time after the Secret
changes (its sync period plus its cache: up to about two minutes by default),
and Valkey reads them only when told to: a CONFIG SET of the tls-* file
directives to their own paths loads the files again, on every supported
version, without a restart; existing connections keep the context they were
opened with. The operator cannot read a pod's files, so it decides from two
facts:
- the certificate each node presents in a real handshake (the probe's): a node
  presenting another leaf than the Secret's is told to reload at every pass,
  since its files may already be new;
- the content each pod has surely loaded, in its `tls-loaded` annotation: a
  pod is created with the content the operator saw (the kubelet mounts it at
  start); an older pod is told to reload once more when `secretSyncSeconds`
  have passed since the operator first saw the current content
  (`status.tls.changedAt`), and annotated once that reload succeeded. This
  reload is what carries a change the handshake cannot show, such as a CA
  bundle, to every node.
A node is current when it presents the Secret's leaf and has loaded its
content; the cluster is Active only when every node is.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from controllers.cluster.decision.actions import PatchPodMetadata, ReloadTls
from controllers.cluster.decision.desired import DesiredTls
from controllers.cluster.decision.view import Node, View
from controllers.shared.versions import meets_floor
from valkey_operator.api.resources import GROUP

TLS_LOADED_ANNOTATION = f"{GROUP}/tls-loaded"
"""On a pod: the Secret content hash its server loaded after the kubelet had surely written it."""

RELOAD_RETRY_S = 5.0
"""While a node presents an old leaf, how often it is asked to load its files again."""


@attrs.frozen
class TlsView:
    """The certificate facts of one pass."""

    tls: DesiredTls
    changed_at: float
    """When the operator first saw the Secret's current content (Unix seconds)."""
    stale: tuple[Node, ...]
    """Nodes that do not present the Secret's leaf, or have not surely loaded its content."""

    @property
    def settles_at(self) -> float:
        return self.changed_at + self.tls.sync_delay


def tls_view(view: View) -> TlsView | None:
    return view.once("tls_view", lambda: _tls_view(view))


def _tls_view(view: View) -> TlsView | None:
    tls = view.desired.tls
    if tls is None:
        return None
    changed_at = _changed_at(view, tls)
    stale = tuple(node for node in _nodes(view) if not _current(node, tls))
    return TlsView(tls, changed_at, stale)


def _changed_at(view: View, tls: DesiredTls) -> float:
    recorded = view.context.recorded_tls
    if recorded is not None and recorded.secret_hash == tls.material.content_hash:
        return recorded.changed_at
    return float(int(view.now))


def _nodes(view: View) -> Iterable[Node]:
    for node in view.nodes.values():
        if not node.pod.deleting and meets_floor(node.obs.version) and node.obs.served is not None:
            yield node


def _current(node: Node, tls: DesiredTls) -> bool:
    served = node.obs.served
    if served is None or served.fingerprint != tls.material.leaf.fingerprint:
        return False
    return node.pod.annotations.get(TLS_LOADED_ANNOTATION) == tls.material.content_hash


def reload_tls(view: View) -> Iterable[ReloadTls | PatchPodMetadata]:
    """Reloads of the stale nodes; once settled, each followed by the `tls-loaded` annotation that
    records the content as loaded (patched only after that reload succeeded)."""
    facts = tls_view(view)
    if facts is None:
        return
    settled = view.now >= facts.settles_at
    content = facts.tls.material.content_hash
    for node in facts.stale:
        if settled:
            reload = ReloadTls(node.pod.name, node.pod.uid, confirm=content)
            yield reload
            yield PatchPodMetadata(
                node.pod.name, node.pod.uid, ((TLS_LOADED_ANNOTATION, content),), after=reload
            )
        elif (
            node.obs.served is not None and node.obs.served.fingerprint != facts.tls.material.leaf.fingerprint
        ):
            yield ReloadTls(node.pod.name, node.pod.uid)


def created_annotations(view: View) -> tuple[tuple[str, str], ...]:
    """A new pod mounts the Secret's content as the operator sees it now."""
    tls = view.desired.tls
    return ((TLS_LOADED_ANNOTATION, tls.material.content_hash),) if tls is not None else ()


def until_settled(view: View, longest: float) -> float:
    """Seconds until the stale nodes are reloaded for good (at most `longest`, at least one)."""
    facts = tls_view(view)
    if facts is None:
        return longest
    return max(1.0, min(longest, facts.settles_at - view.now))


def earliest_expiry(view: View) -> tuple[Node, float] | None:
    """The node presenting the certificate that expires first, and when (Unix seconds)."""
    served = [(node, node.obs.served.not_after) for node in _nodes(view) if node.obs.served is not None]
    return min(served, key=lambda item: item[1], default=None)
