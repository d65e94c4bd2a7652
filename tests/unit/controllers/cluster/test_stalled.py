"""Stalled=True (kstatus Failed) when only a human can unblock a cluster (stalled.py), pure: an
operator flag, an RBAC refusal, an image that never pulls; not for what may appear by itself."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from status_support import blocked_document

from controllers.cluster.decision import stalled
from controllers.cluster.decision.actions import ApplyObject, Failure
from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import Desired, OwnedObject
from controllers.cluster.decision.plan import finish, plan
from controllers.cluster.decision.report import PlannedStatus, Reason
from controllers.cluster.decision.restore import RestoreHeld
from controllers.cluster.restore_source import RestoreSources
from controllers.shared.observation import Observation, PodObservation
from valkey_operator.api.backup import Restore
from valkey_operator.core.resource import SERVICES
from valkey_operator.core.rest import Obj

NOW = datetime.datetime(2026, 12, 4, 12, 0, 0, tzinfo=datetime.UTC)
DESIRED = Desired(
    shards=1,
    replicas_per_shard=0,
    template_hash="h1",
    image="registry.example/valkey:9.1.2",
    config_hash="abc",
)
RBAC = (
    'pods is forbidden: User "system:serviceaccount:ops:valkey-operator" cannot create resource "pods" '
    'in API group "" in the namespace "shop"'
)


def test_only_the_authorizer_s_403_is_an_rbac_refusal() -> None:
    assert stalled.rbac_denied(403, RBAC)
    assert stalled.rbac_denied(403, RBAC + ': RBAC: role.rbac.authorization.k8s.io "x" not found')
    # 403s from admission: they can lift without a change of the operator's permissions.
    quota = (
        'pods "c-0-ab" is forbidden: exceeded quota: compute, requested: cpu=1, used: cpu=4, limited: cpu=4'
    )
    terminating = (
        'pods "c-0-ab" is forbidden: unable to create new content in namespace shop '
        "because it is being terminated"
    )
    pod_security = (
        'pods "c-0-ab" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true'
    )
    webhook = 'admission webhook "policy.example" denied the request: no'
    for message in (quota, terminating, pod_security, webhook):
        assert not stalled.rbac_denied(403, message), message
    assert not stalled.rbac_denied(404, RBAC)


def test_a_pull_is_human_only_after_the_bound_an_unparsable_reference_at_once() -> None:
    now = NOW.timestamp()
    bound = stalled.IMAGE_PULL_BOUND
    assert not stalled.pull_stuck("ErrImagePull", now - bound + 1, now)
    assert stalled.pull_stuck("ImagePullBackOff", now - bound, now)
    assert stalled.pull_stuck("ErrImagePull", now - bound - 60, now)
    assert not stalled.pull_stuck("ImagePullBackOff", None, now)
    assert stalled.pull_stuck("InvalidImageName", now, now)
    assert stalled.pull_stuck("ErrImageNeverPull", now, now)
    assert not stalled.pull_stuck("ContainerCreating", now - 10 * bound, now)


def pod(name: str, age: float, waiting: str | None, *, init: bool = False, template: str = "h1") -> Obj:
    created = (NOW - datetime.timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
    state = {"waiting": {"reason": waiting, "message": f"Back-off pulling image {DESIRED.image}"}}
    statuses = [{"name": "restore" if init else "valkey", "image": DESIRED.image, "state": state}]
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "labels": {"valkey.gomomento.com/shard": "0", "valkey.gomomento.com/template-hash": template},
        },
        "status": {
            "phase": "Pending",
            ("initContainerStatuses" if init else "containerStatuses"): statuses if waiting else [],
        },
    }


def test_the_observation_reads_the_first_container_waiting_for_its_image() -> None:
    seen = PodObservation.from_pod(pod("c-0-a", 10, "ImagePullBackOff", init=True))
    assert seen.image_wait == "ImagePullBackOff"
    assert seen.image_wait_message.startswith(
        f"container restore ({DESIRED.image}): ImagePullBackOff: Back-off"
    )
    assert PodObservation.from_pod(pod("c-0-a", 10, "ContainerCreating")).image_wait is None
    assert PodObservation.from_pod(pod("c-0-a", 10, None)).image_wait is None


def planned(*pods: Obj) -> PlannedStatus:
    observation = Observation(pods=tuple(PodObservation.from_pod(p) for p in pods))
    return plan(observation, DESIRED, Context(now=NOW.timestamp())).status


def test_a_pod_whose_image_does_not_pull_stalls_the_cluster_after_the_bound() -> None:
    early = planned(pod("c-0-a", stalled.IMAGE_PULL_BOUND - 5, "ImagePullBackOff"))
    assert early.condition("Stalled").status is False
    assert Reason.IMAGE_PULL_FAILED not in {finding.reason for finding in early.findings}

    late = planned(pod("c-0-a", stalled.IMAGE_PULL_BOUND + 5, "ImagePullBackOff"))
    condition = late.condition("Stalled")
    assert (condition.status, condition.reason) == (True, "ImagePullFailed")
    assert "c-0-a" in condition.message and condition.message.endswith(stalled.FINDINGS["ImagePullFailed"])
    assert late.condition("Degraded").status is True

    never = planned(pod("c-0-a", 1, "InvalidImageName"))
    assert never.condition("Stalled").status is True


def test_a_pod_of_an_outdated_template_does_not_stall_the_roll_replaces_it() -> None:
    old = planned(pod("c-0-a", 10 * stalled.IMAGE_PULL_BOUND, "ImagePullBackOff", template="h0"))
    assert old.condition("Stalled").status is False


def test_an_rbac_refusal_stalls_the_pass_it_happens_in_and_clears_when_granted() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "c", "namespace": "shop"}}
    action = ApplyObject(OwnedObject(SERVICES, service))
    observation, context = Observation(pods=()), Context(now=NOW.timestamp())
    first = plan(observation, DESIRED, context)
    refused = finish(first, [Failure(action, f"apply Service/c: 403 Forbidden: {RBAC}", forbidden=True)])
    condition = refused.status.condition("Stalled")
    assert (condition.status, condition.reason) == (True, "Forbidden")
    assert (
        "cannot create resource" in condition.message and stalled.FINDINGS["Forbidden"] in condition.message
    )
    other = finish(first, [Failure(action, "apply Service/c: 500 InternalError: etcd timeout")])
    assert other.status.condition("Stalled").status is False
    assert Reason.ACTION_FAILED in {finding.reason for finding in other.status.findings}
    assert plan(observation, DESIRED, context).status.condition("Stalled").status is False


def condition(status: Obj, kind: str) -> Obj:
    return next(c for c in status["conditions"] if c["type"] == kind)


@pytest.mark.parametrize("reason", sorted(stalled.BLOCKED))
def test_a_block_only_a_human_lifts_is_stalled_with_what_to_do(reason: str) -> None:
    for recorded in ({}, {"state": "Active", "conditions": []}):
        status = blocked_document(recorded, 2, reason, "why", "e", "2026-12-04T12:00:00Z")
        found = condition(status, "Stalled")
        assert (found["status"], found["reason"]) == ("True", reason)
        assert found["message"] == f"why; {stalled.BLOCKED[reason]}"


@pytest.mark.parametrize(
    "reason", ["ConfigNotFound", "ImageNotFound", "BackupNotFound", "BackupNotCompleted"]
)
def test_a_block_that_may_lift_by_itself_is_not_stalled(reason: str) -> None:
    status = blocked_document({}, 2, reason, "why", "e", "2026-12-04T12:00:00Z")
    assert condition(status, "Stalled")["status"] == "False"


def held(image: str, phase: str) -> RestoreHeld | object:
    backup = {"metadata": {"name": "nightly", "uid": "u"}, "status": {"phase": phase, "message": "m"}}
    sources = RestoreSources(None, lambda namespace, name: backup, image)  # type: ignore[arg-type]
    return asyncio.run(sources.source("shop", Restore(backup_name="nightly")))


def test_the_restore_reasons_the_gatherer_words_are_the_ones_stalled_names() -> None:
    """restore_source.py words its reasons itself: these are the ones stalled.BLOCKED lists."""
    unknown = held("", "Completed")
    assert isinstance(unknown, RestoreHeld) and unknown.reason == stalled.RESTORE_IMAGE_UNKNOWN
    failed = held("operator:1", "Failed")
    assert isinstance(failed, RestoreHeld) and failed.reason == stalled.BACKUP_FAILED
