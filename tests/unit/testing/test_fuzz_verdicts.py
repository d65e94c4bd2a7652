"""The fuzzer's judgements on plain data: what counts as naming a field, an explaining status,
right protection, and a reconcile error worth reporting."""

from __future__ import annotations

import orjson

from valkey_operator.api.resources import (
    CONFIG_PROTECTION_FINALIZER,
    IMAGE_PROTECTION_FINALIZER,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
    VALKEY_ROLES,
)
from valkey_operator.core.rest import ApiError, Obj
from valkey_testbed.fuzz.verdicts import (
    Tally,
    field_segments,
    names_a_field,
    protection_problem,
    refusal_problem,
    status_problem,
)

SENT = {
    "metadata": {"name": "c"},
    "spec": {"acl": [{"username": "x", "permissions": []}], "valkey": {"a.b": "1"}},
}


def invalid(*fields: str, status: int = 422, reason: str = "Invalid") -> ApiError:
    causes = [{"field": field, "message": "is wrong", "reason": "FieldValueInvalid"} for field in fields]
    body = {"kind": "Status", "reason": reason, "message": "x is invalid", "details": {"causes": causes}}
    return ApiError(status, orjson.dumps(body))


def test_field_paths_split_on_dots_and_brackets() -> None:
    assert field_segments("spec.acl[0].username") == ["spec", "acl", "[0]", "username"]
    assert field_segments("spec.valkey[a.b]") == ["spec", "valkey", "[a.b]"]


def test_a_field_is_named_when_its_parent_was_sent() -> None:
    assert names_a_field(SENT, "spec.acl[0].username")
    assert names_a_field(SENT, "spec.acl[0].passwordHashes")  # missing itself: Required value
    assert names_a_field(SENT, "spec.valkey[a.b]")
    assert names_a_field(SENT, "spec.valkey.a.b")  # a map key with a dot, written dotted
    assert not names_a_field(SENT, "<nil>")
    assert names_a_field(SENT, "metadata.name")
    assert not names_a_field(SENT, "spec.acl[1].username")
    assert not names_a_field(SENT, "spec.tls.secretRef")
    assert not names_a_field(SENT, "")


def test_only_a_422_naming_sent_fields_is_a_refusal() -> None:
    assert refusal_problem(SENT, invalid("spec.acl[0].username")) is None
    assert "no field" in str(refusal_problem(SENT, invalid("spec.acl[0].username", "")))
    assert "500" in str(refusal_problem(SENT, invalid("spec", status=500, reason="InternalError")))
    assert "without a cause" in str(refusal_problem(SENT, invalid()))


def test_a_cause_without_a_field_may_name_it_in_its_message() -> None:
    error = invalid("<nil>")
    error.body["details"]["causes"][0]["message"] = (
        'Invalid value: "": Checked value must be of type integer with format int32 in spec.acl[0].username'
    )
    assert refusal_problem(SENT, error) is None
    error.body["details"]["causes"][0]["message"] = "Invalid value: something"
    assert "no field" in str(refusal_problem(SENT, error))


def test_the_servers_unchecked_rules_note_is_no_cause_of_its_own() -> None:
    error = invalid("spec.acl[0].username")
    note = {"field": "<nil>", "message": "Invalid value: null: some validation rules were not checked"}
    error.body["details"]["causes"].append(note)
    assert refusal_problem(SENT, error) is None
    error.body["details"]["causes"] = [note]
    assert "without a cause" in str(refusal_problem(SENT, error))


def obj(kind: str, name: str, spec: Obj, status: Obj | None = None, **meta: object) -> Obj:
    return {
        "kind": kind,
        "metadata": {"name": name, "generation": 2, "uid": name, **meta},
        "spec": spec,
        "status": status or {},
    }


def test_status_explains_at_the_current_generation() -> None:
    resolved = {"type": "Resolved", "status": "False", "reason": "BaseCycle", "message": "a -> a"}
    config = obj("ValkeyConfig", "a", {}, {"observedGeneration": 2, "conditions": [resolved]})
    assert status_problem(VALKEY_CONFIGS, config) is None
    stale = obj("ValkeyConfig", "a", {}, {"observedGeneration": 1, "conditions": [resolved]})
    assert "observedGeneration" in str(status_problem(VALKEY_CONFIGS, stale))
    assert status_problem(VALKEY_ROLES, obj("ValkeyRole", "r", {}, {"observedGeneration": 2})) == "no summary"
    ready = {"type": "Ready", "status": "False", "reason": "ConfigNotFound", "message": "not found"}
    cluster = {"observedGeneration": 2, "state": "Creating", "message": "m", "conditions": [ready]}
    assert status_problem(VALKEY_CLUSTERS, obj("ValkeyCluster", "k", {}, cluster)) is None
    assert "state" in str(
        status_problem(VALKEY_CLUSTERS, obj("ValkeyCluster", "k", {}, {**cluster, "state": "x"}))
    )
    assert status_problem(VALKEY_IMAGES, obj("ValkeyImage", "i", {})) is None


def test_protection_follows_live_referrers() -> None:
    image = obj("ValkeyImage", "i", {})
    protected = obj("ValkeyImage", "i", {}, finalizers=[IMAGE_PROTECTION_FINALIZER])
    config = obj("ValkeyConfig", "c", {"imageRef": "i"})
    assert "not protected" in str(protection_problem(VALKEY_IMAGES, image, {VALKEY_CONFIGS: [config]}))
    assert protection_problem(VALKEY_IMAGES, protected, {VALKEY_CONFIGS: [config]}) is None
    assert "nothing names it" in str(protection_problem(VALKEY_IMAGES, protected, {VALKEY_CONFIGS: []}))
    going = obj("ValkeyConfig", "c", {"imageRef": "i"}, deletionTimestamp="2026-01-01T00:00:00Z")
    assert protection_problem(VALKEY_IMAGES, image, {VALKEY_CONFIGS: [going]}) is None  # either is fine
    own_base = obj("ValkeyConfig", "c", {"baseRef": "c"}, finalizers=[CONFIG_PROTECTION_FINALIZER])
    assert protection_problem(VALKEY_CONFIGS, own_base, {VALKEY_CONFIGS: [own_base]}) is None


def test_tally_counts_passes_and_flags_unexpected_errors() -> None:
    tally = Tally()
    tally.add(
        [
            {"event": "reconciled", "controller": "valkeycluster", "key": "ns/a"},
            {"event": "reconciled", "controller": "valkeycluster", "key": "ns/a"},
            {
                "event": "reconcile failed",
                "controller": "valkeyconfig",
                "key": "c",
                "error": "ApiError: 409 Conflict: x",
            },
            {
                "event": "reconcile failed",
                "controller": "valkeyrole",
                "key": "r",
                "error": "KeyError: 'name'",
            },
            {"event": "starting manager", "level": "info"},
        ]
    )
    assert tally.passes == {"valkeycluster": 2, "valkeyconfig": 1, "valkeyrole": 1}
    assert tally.busiest() == ("valkeycluster ns/a", 2)
    assert tally.unexpected == ["valkeyrole r: KeyError: 'name'"]
