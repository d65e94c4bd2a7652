"""TLS rotation in the planner: which nodes reload their certificate files, when, and what the status says."""

from __future__ import annotations

import attrs
from planner_harness import run

from controllers.cluster.decision.actions import NewPod, ReloadTls
from controllers.cluster.decision.certificates import RELOAD_RETRY_S, TLS_LOADED_ANNOTATION
from controllers.cluster.decision.context import Context, TlsRecord
from controllers.cluster.decision.desired import Desired, DesiredTls
from controllers.cluster.decision.plan import REQUEUE_STEADY, Plan, plan
from controllers.cluster.decision.report import Reason
from controllers.shared.observation import Observation
from controllers.shared.tls import Certificate, TlsMaterial
from valkey_operator.api.cluster import DEGRADED, ClusterState

YEAR = 365 * 86400.0
SYNC = 120.0


def material(leaf: str, content: str, not_after: float = 2e9) -> TlsMaterial:
    return TlsMaterial(
        secret="tls",
        leaf=Certificate(fingerprint=leaf, serial=leaf.upper(), not_after=not_after),
        ca_pem="-----BEGIN CERTIFICATE-----",
        content_hash=content,
    )


def desired(tls: TlsMaterial, shards: int = 2, replicas: int = 1) -> Desired:
    return Desired(
        shards=shards,
        replicas_per_shard=replicas,
        template_hash="t1",
        image="valkey/valkey:9.1.2",
        tls=DesiredTls(material=tls, sync_delay=SYNC, expiry_warning=7 * 86400.0),
    )


def world(
    served: str, loaded: str | None, recorded: tuple[str, float] | None, *, expires_in: float = YEAR
) -> tuple[Observation, Context, Desired]:
    """An Active 2x1 cluster whose nodes present the leaf `served` and whose pods say they loaded `loaded`;
    status.tls records (content, seconds before now it was first seen)."""
    base = desired(material("a", "h1"))
    result = run(base)
    assert result.last.status.state is ClusterState.ACTIVE
    observed = result.sim.observe()
    cert = Certificate(fingerprint=served, serial=served.upper(), not_after=observed.now + expires_in)
    nodes = {name: attrs.evolve(node, served=cert) for name, node in observed.nodes.items()}
    annotations = {TLS_LOADED_ANNOTATION: loaded} if loaded else {}
    pods = tuple(attrs.evolve(pod, annotations={**pod.annotations, **annotations}) for pod in observed.pods)
    record = TlsRecord(secret_hash=recorded[0], changed_at=observed.now - recorded[1]) if recorded else None
    context = Context(recorded_state=ClusterState.ACTIVE, recorded_tls=record)
    return attrs.evolve(observed, nodes=nodes, pods=pods), context, base


def reloads(planned: Plan) -> list[ReloadTls]:
    return [action for action in planned.actions if isinstance(action, ReloadTls)]


def test_nodes_that_present_the_secrets_leaf_and_loaded_its_content_are_left_alone() -> None:
    observed, context, base = world("a", "h1", ("h1", 3600))
    planned = plan(observed, base, context)
    assert planned.actions == ()
    assert planned.status.state is ClusterState.ACTIVE
    assert planned.status.tls is not None and planned.status.tls.secret_hash == "h1"


def test_a_new_leaf_is_reloaded_at_once_and_retried_until_presented() -> None:
    observed, context, base = world("a", "h1", ("h1", 3600))
    planned = plan(
        observed, attrs.evolve(base, tls=attrs.evolve(base.tls, material=material("b", "h2"))), context
    )
    assert len(reloads(planned)) == 4 and all(r.confirm is None for r in reloads(planned))
    assert planned.requeue_after == RELOAD_RETRY_S
    assert planned.status.state is ClusterState.UPDATING
    assert planned.status.findings[0].reason is Reason.RELOADING_TLS
    assert planned.status.tls is not None and planned.status.tls.secret_hash == "h2"


def test_a_ca_only_change_waits_for_the_kubelet_then_reloads_each_node_once() -> None:
    new = material("a", "h2")
    observed, context, base = world("a", "h1", ("h2", 10))
    waiting = plan(observed, attrs.evolve(base, tls=attrs.evolve(base.tls, material=new)), context)
    assert reloads(waiting) == []
    assert waiting.status.state is ClusterState.UPDATING
    assert waiting.requeue_after == REQUEUE_STEADY  # 110 s to go, capped
    observed, context, _ = world("a", "h1", ("h2", SYNC + 1))
    due = plan(observed, attrs.evolve(base, tls=attrs.evolve(base.tls, material=new)), context)
    assert [r.confirm for r in reloads(due)] == ["h2"] * 4
    observed, context, _ = world("a", "h2", ("h2", SYNC + 5))
    assert plan(observed, attrs.evolve(base, tls=attrs.evolve(base.tls, material=new)), context).actions == ()


def test_new_pods_are_created_with_the_content_they_mount() -> None:
    base = desired(material("a", "h1"))
    first = run(base, max_passes=1).plans[0]
    creates = [action for action in first.actions if isinstance(action, NewPod)]
    assert creates and all(dict(c.annotations) == {TLS_LOADED_ANNOTATION: "h1"} for c in creates)


def test_a_certificate_about_to_expire_degrades_an_active_cluster() -> None:
    observed, context, base = world("a", "h1", ("h1", 3600), expires_in=3 * 86400.0)
    planned = plan(observed, base, context)
    assert planned.status.state is ClusterState.ACTIVE
    degraded = planned.status.condition(DEGRADED)
    assert degraded.status and degraded.reason == Reason.CERTIFICATE_EXPIRING
    assert "renew Secret tls" in degraded.message
