"""The pass's Context (pure): what the planner reads besides the Observation, built once in decide()."""

from __future__ import annotations

import attrs
from decide_harness import gather, run, world

from controllers.cluster.decision.context import Context, TlsRecord
from controllers.cluster.decision.decide import run_pass
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.memory import Expected, Refusal, Refusals
from controllers.cluster.decision.view import View
from controllers.shared.observation import Observation
from valkey_operator.api.cluster import ClusterState, TlsStatus, ValkeyClusterStatus


def test_the_context_reads_the_stored_status_the_awaited_writes_and_the_live_refusals() -> None:
    stored = ValkeyClusterStatus(
        state=ClusterState.UPDATING,
        config_hash="c1",
        current_image="valkey/valkey:9.1.2",
        tls=TlsStatus(secret_hash="h1", changed_at="2026-12-05T00:00:10Z"),
    )
    refusals = Refusals(named={"gone": {"hz": Refusal("5", "no")}, "here": {"hz": Refusal("6", "no")}})
    context = Context.of(
        now=42.0,
        recorded=stored,
        expected=Expected().expect(40.0, created=["vk-0-new"]),
        refusals=refusals,
        pods=["here"],
        may_roll=False,
    )
    assert (context.now, context.recorded_state, context.may_roll) == (42.0, ClusterState.UPDATING, False)
    assert (context.recorded_config_hash, context.recorded_image) == ("c1", "valkey/valkey:9.1.2")
    assert context.recorded_tls == TlsRecord(secret_hash="h1", changed_at=1_796_428_810.0)
    assert context.awaiting == {"vk-0-new"}
    assert set(context.refusals.named) == {"here"}  # a pod that is gone refuses nothing
    unparsed = TlsStatus(secret_hash="h1", changed_at="yesterday")
    assert TlsRecord.of(unparsed) is None and TlsRecord.of(TlsStatus(secret_hash="")) is None


def test_the_view_reads_the_context_and_copies_none_of_it() -> None:
    context = Context(now=7.0, recorded_state=ClusterState.ACTIVE, may_roll=False)
    view = View(
        Observation(pods=()), Desired(shards=1, replicas_per_shard=0, template_hash="t", image="i"), context
    )
    assert view.context is context and view.now == 7.0
    copied = [
        field.name for field in attrs.fields(Context) if field.name != "now" and hasattr(view, field.name)
    ]
    assert copied == []
    assert view.formed_before()  # from the stored state, read through the context


def test_decide_builds_the_planners_context_from_the_facts() -> None:
    found = run(world(1, 1))
    assert found.state == ClusterState.ACTIVE.value
    facts = gather(found)
    decision = run_pass(facts)
    assert decision.plan is not None
    context = decision.plan.view.context
    assert context.now == facts.now and context.recorded_state is ClusterState.ACTIVE
    assert context.recorded_config_hash == facts.recorded.config_hash is not None
    assert context.recorded_image == facts.recorded.current_image is not None
    assert context.may_roll and context.awaiting == frozenset() and context.refusals == Refusals()
    assert decision.plan.view.pods == tuple(sorted(facts.observation.pods, key=lambda pod: pod.order))
