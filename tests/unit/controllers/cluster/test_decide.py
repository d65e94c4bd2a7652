"""decide(): every action, the whole status, the Events and metric changes of a pass, from facts."""

from __future__ import annotations

import random

import attrs
from decide_harness import FRESH, SECRET_KEY, World, config, gather, run, step, world
from test_decide_reasons import certificates_rotate

from controllers.cluster.decision.actions import (
    ApplyObject,
    CreateObject,
    CreatePod,
    Failover,
    Failure,
    Promote,
)
from controllers.cluster.decision.certificates import TLS_LOADED_ANNOTATION
from controllers.cluster.decision.decide import (
    REQUEUE_BLOCKED,
    TLS_SECRET_INVALID,
    Decision,
    Event,
    decide,
    failover_counts,
)
from controllers.cluster.decision.owned import owned_names, owned_objects
from controllers.cluster.render.acl import RenderedAcl, render_acl
from controllers.cluster.render.context import RenderContext
from controllers.shared import names
from controllers.shared.config_resolve import ResolvedConfig
from controllers.shared.credentials import read_credentials
from controllers.shared.tls import TlsProblem
from valkey_operator.api.cluster import ValkeyCluster
from valkey_operator.core.clock import rfc3339
from valkey_operator.core.events import NORMAL, WARNING

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def first(found: World) -> Decision:
    return decide(gather(found), NOW)


def test_a_missing_internal_secret_is_created_with_the_drawn_passwords_never_applied() -> None:
    decision = first(world(1, 0))
    created = decision.actions[0]
    assert isinstance(created, CreateObject) and created.object.key == SECRET_KEY
    assert read_credentials(created.object.body) == FRESH
    applied = [action.object.key for action in decision.actions if isinstance(action, ApplyObject)]
    assert SECRET_KEY not in applied and applied  # the other owned objects are applied as usual


def test_an_existing_secret_is_read_not_created_and_a_paused_cluster_creates_none() -> None:
    found = world(1, 0)
    step(found)
    assert not any(isinstance(action, CreateObject) for action in first(found).actions)
    paused = world(1, 0)
    paused.annotate({"valkey.gomomento.com/paused": "true"})
    assert first(paused).actions == ()


def test_new_pods_carry_the_drawn_name_and_their_whole_rendered_body() -> None:
    found = world(2, 1, tls={"secretRef": "vk-tls"})
    facts = gather(found)
    decision = decide(facts, NOW)
    pods = [action for action in decision.actions if isinstance(action, CreatePod)]
    assert len(pods) == 4 and len({pod.name for pod in pods}) == 4
    for pod in pods:
        assert pod.name.startswith(f"vk-{pod.shard}-") and len(pod.name) == len("vk-0-") + names.SUFFIX_LENGTH
        assert pod.body is not None and pod.body["metadata"]["name"] == pod.name
        assert pod.body["spec"]["hostname"] == pod.name
        assert pod.body["metadata"]["labels"][names.SHARD_LABEL] == str(pod.shard)
    assert decide(facts, NOW) == decision  # the same seed names them the same
    reseeded = decide(attrs.evolve(facts, name_seed=facts.name_seed + 1), NOW)
    assert [a.name for a in reseeded.actions if isinstance(a, CreatePod)] != [pod.name for pod in pods]


def test_a_tls_cluster_creates_pods_annotated_with_the_content_they_mount() -> None:
    found = certificates_rotate(random.Random(1))
    created = [a for d in found.decisions for a in d.actions if isinstance(a, CreatePod)]
    assert created and all(
        pod.body is not None and pod.body["metadata"]["annotations"][TLS_LOADED_ANNOTATION] == "c2"
        for pod in created
    )


def test_transitions_are_stamped_with_the_passs_now_never_the_real_clock() -> None:
    facts = gather(world(1, 0))
    early, late = decide(facts, NOW), decide(facts, NOW + 3600)
    assert {c.last_transition_time for c in early.status.conditions} == {rfc3339(NOW)}
    assert {c.last_transition_time for c in late.status.conditions} == {rfc3339(NOW + 3600)}


def test_a_blocked_cluster_says_why_once_and_waits() -> None:
    found = world(1, 0, tls={"secretRef": "vk-tls"})
    found.tls = TlsProblem("Secret vk-tls not found")
    decision = step(found)
    assert decision.actions == () and decision.requeue_after == REQUEUE_BLOCKED
    assert decision.events == (Event(WARNING, TLS_SECRET_INVALID, "Secret vk-tls not found"),)
    assert decision.status.message == f"{TLS_SECRET_INVALID}: Secret vk-tls not found"
    assert step(found).events == ()  # the same reason and message: no second Event
    found.tls = TlsProblem("Secret vk-tls has no tls.key")
    assert [event.reason for event in step(found).events] == [TLS_SECRET_INVALID]


def test_becoming_active_is_an_event_and_a_metric_state() -> None:
    found = run(world(1, 0))
    assert found.last.events == (Event(NORMAL, "Active", found.last.status.message or ""),)
    assert found.last.metrics.state is not None and found.last.metrics.state.value == "Active"
    assert all(event.reason != "Active" for decision in found.decisions[:-1] for event in decision.events)


def test_a_roll_starts_and_finishes_with_events_and_its_duration() -> None:
    found = run(world(1, 1))
    found.images["v9b"] = {
        "metadata": {"name": "v9b"},
        "spec": {"repository": "valkey/valkey", "tag": "9.1.3"},
    }
    found.configs["cfg"] = config(image="v9b")
    run(found, passes=80, until=lambda w: w.state == "Active" and "rollout" not in w.status)
    reasons = [event.reason for decision in found.decisions for event in decision.events]
    assert reasons.count("RolloutStarted") == 1 and reasons.count("RolloutFinished") == 1
    started = next(d for d in found.decisions if d.metrics.rollout_started)
    finished = next(d for d in found.decisions if d.metrics.rollout_finished)
    assert finished.metrics.rollout_seconds == finished.now - started.now
    assert sum(d.metrics.failovers.get("coordinated", 0) for d in found.decisions) == 1


def test_failed_failovers_are_not_counted_and_failures_reach_the_status() -> None:
    actions = (Failover("vk-0-a"), Promote("vk-1-b", "ghost"))
    assert failover_counts(actions, [Failure(actions[0], "timeout")]) == {"takeover": 1}
    found = run(world(1, 0))
    decision = decide(gather(found), NOW)
    assert decision.after(()) is decision
    found.edit(podAnnotations={"example.com/a": "1"})
    decision = decide(gather(found), NOW)
    (patch, *_) = decision.actions
    failed = decision.after([Failure(patch, "PatchPodMetadata vk-0: 500")])
    degraded = next(c for c in failed.status.conditions if c.type == "Degraded")
    assert degraded.reason == "ActionFailed" and "500" in degraded.message
    assert [event.reason for event in failed.events] == ["Updating", "ActionFailed"]


def test_the_gatherer_looks_up_every_object_the_decision_renders() -> None:
    for shards in (1, 3):
        cluster = ValkeyCluster.from_dict(world(shards, 1).cluster)
        facts = gather(world(shards, 1))
        assert isinstance(facts.resolved, ResolvedConfig)
        ctx = RenderContext(cluster=cluster, config=facts.resolved)
        acl = render_acl((), lambda _role: None, FRESH)
        assert isinstance(acl, RenderedAcl)
        rendered = {owned.key for owned in owned_objects(ctx, (FRESH, acl))}
        assert rendered == {f"{resource.kind}/{name}" for resource, name in owned_names(cluster)}
