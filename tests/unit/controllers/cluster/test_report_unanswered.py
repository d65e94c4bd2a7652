"""A formed cluster whose nodes do not answer the operator is not reported as having lost data.

Seen when the operator presented a client certificate its nodes did not trust yet (a one-step CA
rotation under clientAuth Required): every slot looked unowned, and the status said they were
"rebuilt empty (data lost)" while nothing was rebuilt, nor could be (the planner assigns no slot
while a pod that may run a server did not answer)."""

from __future__ import annotations

import observed

from controllers.cluster.decision.actions import AssignSlots
from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import Desired, DesiredTls
from controllers.cluster.decision.plan import plan
from controllers.cluster.decision.report import Reason
from controllers.shared.observation import NodeObservation, Observation
from controllers.shared.tls import Certificate, TlsMaterial
from valkey_operator.api.cluster import ClusterState

NOW = 1_800_000_000.0
MATERIAL = TlsMaterial(
    secret="tls", leaf=Certificate(fingerprint="f", serial="F", not_after=2e9), ca_pem="", content_hash="c"
)


def test_nodes_that_do_not_answer_are_reported_unreachable_not_their_slots_lost() -> None:
    pods = (observed.pod("vk-0-a", 0, "10.0.0.1"), observed.pod("vk-1-b", 1, "10.0.0.2"))
    refused = NodeObservation.unreachable("SSL: TLSV1_ALERT_UNKNOWN_CA")
    observation = Observation(pods=pods, nodes={"vk-0-a": refused, "vk-1-b": refused})
    desired = Desired(shards=2, replicas_per_shard=0, template_hash="t1", image="i")
    planned = plan(observation, desired, Context(now=NOW, recorded_state=ClusterState.ACTIVE))
    reasons = {finding.reason for finding in planned.status.findings}
    assert Reason.NODES_UNREACHABLE in reasons
    assert Reason.DATA_LOST not in reasons, planned.status.message
    assert "not assigned yet" not in planned.status.message
    assert not [action for action in planned.actions if isinstance(action, AssignSlots)]


def test_nodes_refusing_the_operators_certificate_are_named_with_the_way_out() -> None:
    pods = (observed.pod("vk-0-a", 0, "10.0.0.1"), observed.pod("vk-1-b", 1, "10.0.0.2"))
    refused = NodeObservation.unreachable(
        "10.0.0.1:6379: Error while reading from 10.0.0.1:6379 : "
        "(1, '[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca (_ssl.c:2580)')"
    )
    reset = NodeObservation.unreachable("10.0.0.2:6379: Connection reset by peer")
    observation = Observation(pods=pods, nodes={"vk-0-a": refused, "vk-1-b": reset})
    tls = DesiredTls(material=MATERIAL, client_certificates=True)
    desired = Desired(shards=2, replicas_per_shard=0, template_hash="t1", image="i", tls=tls)
    planned = plan(observation, desired, Context(now=NOW, recorded_state=ClusterState.ACTIVE))
    assert planned.status.message.startswith(
        "unreachable: vk-0-a, vk-1-b; vk-0-a refuse the operator's client certificate "
        "(tls.crt of Secret tls, from a CA they have not loaded): put the previous tls.crt and tls.key "
        "back beside the new ca.crt until Active, then the new leaf"
    ), planned.status.message
