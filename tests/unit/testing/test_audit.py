"""The audit log reader: entries as the API server writes them (audit.k8s.io/v1 JSON lines)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from valkey_testbed import audit

ENTRY = {
    "kind": "Event",
    "apiVersion": "audit.k8s.io/v1",
    "level": "Metadata",
    "stage": "ResponseComplete",
    "requestURI": "/apis/valkey.gomomento.com/v1alpha1/namespaces/w/valkeyclusters/c/status",
    "verb": "patch",
    "user": {"username": "system:serviceaccount:r:vo-valkey-operator", "groups": ["system:serviceaccounts"]},
    "objectRef": {
        "resource": "valkeyclusters",
        "namespace": "w",
        "name": "c",
        "apiGroup": "valkey.gomomento.com",
        "apiVersion": "v1alpha1",
        "subresource": "status",
    },
    "responseStatus": {"metadata": {}, "code": 200},
    "requestReceivedTimestamp": "2026-12-02T14:01:02.123456Z",
    "annotations": {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": "RBAC"},
}


def test_an_entry_names_the_resource_as_rbac_does_with_the_decision() -> None:
    event = audit.AuditEvent.of(ENTRY)
    assert (event.resource, event.group, event.verb, event.code) == (
        "valkeyclusters/status",
        "valkey.gomomento.com",
        "patch",
        200,
    )
    assert event.decision == "allow" and event.namespace == "w" and event.name == "c"
    forbidden = audit.AuditEvent.of({**ENTRY, "responseStatus": {"code": 403}, "annotations": {}})
    assert forbidden.code == 403 and forbidden.decision is None


def test_events_read_the_rotated_backup_before_the_current_file(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    backup = tmp_path / "audit-2026-12-02T14-00-00.000.log"
    backup.write_text(json.dumps({**ENTRY, "verb": "create"}) + "\n")
    log.write_text(json.dumps(ENTRY) + "\n\n" + json.dumps({**ENTRY, "verb": "delete"}) + "\n")
    assert [event.verb for event in audit.events(log)] == ["create", "patch", "delete"]
    assert list(audit.events(tmp_path / "missing.log")) == []


def test_the_policy_keeps_service_accounts_and_pod_deletions_only(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    audit.write_policy(path)
    policy = yaml.safe_load(path.read_text())
    assert policy["omitStages"] == ["RequestReceived"]
    assert [rule["level"] for rule in policy["rules"]] == ["Metadata", "Metadata", "None"]
    assert policy["rules"][0]["userGroups"] == ["system:serviceaccounts"]
    assert policy["rules"][1]["resources"] == [{"resources": ["pods"]}]
    flags = audit.apiserver_flags(path, tmp_path / "audit.log")
    assert f"--audit-policy-file={path}" in flags and "--audit-log-format=json" in flags
