"""docs/troubleshooting.md has a section for every condition reason the operator sets and every alert
in the chart, each alert's runbook_url points at its own section, and no section names a reason or
an alert that no longer exists.

The reasons are read from the code: the cluster's Reason enum and blocking reasons, the Literal
types of config resolution, ACL and object-store failures, and every string literal passed as the
reason of the constructors below (an AST scan of controllers/ and the object store), so a reason
added inline shows up here without anyone listing it.
"""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import yaml

from controllers.cluster.decision import decide, failures, stalled
from controllers.cluster.decision.report import Reason
from controllers.cluster.render.acl import AclErrorReason
from controllers.shared.config_resolve import FailureReason
from valkey_operator.api.backup import BackupPhase
from valkey_operator.objectstore.errors import Reason as StorageReason

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "troubleshooting.md"
ALERTS = ROOT / "charts" / "valkey-operator" / "files" / "alerts.yaml"
RUNBOOK_BASE = "docs/troubleshooting.md#"
"""The repository path of the runbooks; the chart puts prometheusRule.runbookBaseURL before it."""
SCANNED = (ROOT / "controllers", ROOT / "valkey_operator" / "objectstore")
REASON_FIRST = frozenset(
    {"BackupFailed", "RestoreHeld", "AccessProblem", "ResolutionFailure", "StorageError", "Finding"}
)
"""Constructors whose first argument is a condition (or status) reason."""
SET_CONDITION_REASON = 3
"""set_condition(conditions, type, status, reason, message, ...): the reason's position."""
ALERTS_HEADING = "Alerts"
REASONS_HEADINGS = ("ValkeyCluster", "ValkeyConfig", "ValkeyRole", "ValkeyBackup", "Shared by")


def _called(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def inline_reasons() -> set[str]:
    """Reason words written as literals at the call that sets them."""
    found: set[str] = set()
    for directory in SCANNED:
        for path in directory.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Call):
                    continue
                name = _called(node)
                if name in REASON_FIRST and node.args:
                    word = _literal(node.args[0])
                elif name == "set_condition" and len(node.args) > SET_CONDITION_REASON:
                    word = _literal(node.args[SET_CONDITION_REASON])
                else:
                    word = None
                if word:
                    found.add(word)
    return found


def condition_reasons() -> set[str]:
    """Every reason a ValkeyCluster, ValkeyConfig, ValkeyRole or ValkeyBackup condition (or a
    backup's status.reason, a restore's status.restore.reason) can carry. ValkeyImage has none."""
    reasons = {str(reason) for reason in Reason}
    reasons |= {
        decide.TLS_SECRET_INVALID,
        decide.INTERNAL_SECRET_DAMAGED,
        decide.PASSWORD_SECRET_INVALID,
        decide.NAME_CONFLICT,
    }
    reasons |= set(stalled.BLOCKED)
    for literal in (FailureReason, AclErrorReason, StorageReason):
        reasons |= set(typing.get_args(literal))
    # A backup's conditions carry its phase as the reason until it fails (reconciler._conditions).
    reasons |= {str(phase) for phase in BackupPhase if phase is not BackupPhase.FAILED}
    # A Warning Event of its own, not a condition's, documented among the cluster's problems.
    reasons.add(failures.POD_FAILED)
    return reasons | inline_reasons()


def alert_rules() -> list[dict[str, typing.Any]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def headings(markdown: str) -> list[tuple[int, str]]:
    """(level, text) of every ATX heading outside code fences."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"(#{1,6}) (.+)", line)):
            found.append((len(match.group(1)), match.group(2).strip()))
    return found


def anchors(markdown: str) -> set[str]:
    """Every anchor of the page, with GitHub's -1, -2 suffixes for repeated headings."""
    seen: dict[str, int] = {}
    result = set()
    for _, text in headings(markdown):
        anchor = github_anchor(text)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        result.add(anchor if count == 0 else f"{anchor}-{count}")
    return result


def sections(markdown: str) -> dict[str, list[str]]:
    """Level-3 headings grouped under the level-2 heading they follow."""
    grouped: dict[str, list[str]] = {}
    current = ""
    for level, text in headings(markdown):
        if level == 2:
            current = text
            grouped.setdefault(current, [])
        elif level == 3:
            grouped.setdefault(current, []).append(text)
    return grouped


def documented_reasons(markdown: str) -> list[str]:
    grouped = sections(markdown)
    return [name for top, names in grouped.items() if top.startswith(REASONS_HEADINGS) for name in names]


def documented_alerts(markdown: str) -> list[str]:
    return sections(markdown).get(ALERTS_HEADING, [])


def test_the_code_yields_the_reasons_it_sets() -> None:
    # Not vacuous: the scan finds the enum's reasons, the inline ones and the Literal ones.
    reasons = condition_reasons()
    assert len(reasons) > 80, len(reasons)
    assert {"SlotsUncovered", "TopologyChanged", "BackupNotCompleted", "BaseCycle"} <= reasons
    assert {"ShardReadFailed", "ClusterNotSettled", "RestoreSourceUnknown", "Accepted"} <= inline_reasons()


def test_every_condition_reason_has_a_section() -> None:
    documented = documented_reasons(DOC.read_text())
    missing = sorted(condition_reasons() - set(documented))
    assert not missing, f"docs/troubleshooting.md has no ### section for: {missing}"


def test_every_reason_section_names_a_reason_the_code_sets_once() -> None:
    documented = documented_reasons(DOC.read_text())
    assert sorted(set(documented) - condition_reasons()) == []
    assert len(documented) == len(set(documented)), "a reason has two sections"


def test_every_alert_has_a_section_and_no_section_outlives_its_alert() -> None:
    names = [rule["alert"] for rule in alert_rules()]
    assert len(names) >= 9
    assert sorted(documented_alerts(DOC.read_text())) == sorted(names)


def test_every_alert_links_its_own_runbook_section() -> None:
    page = anchors(DOC.read_text())
    for rule in alert_rules():
        url = rule.get("annotations", {}).get("runbook_url")
        assert url == RUNBOOK_BASE + rule["alert"].lower(), (rule["alert"], url)
        assert url.removeprefix(RUNBOOK_BASE) in page, f"{url}: no such anchor in docs/troubleshooting.md"


def test_the_anchor_rule_is_githubs() -> None:
    text = "## Alerts\n### ValkeyClusterFailed\n```\n# not a heading\n```\n## Alerts\n"
    assert anchors(text) == {"alerts", "valkeyclusterfailed", "alerts-1"}
    assert github_anchor("Shared by ValkeyBackup and restore: object storage") == (
        "shared-by-valkeybackup-and-restore-object-storage"
    )


LINKED_PAGES = ("troubleshooting.md", "sizing.md", "examples/README.md")
"""The operations pages whose relative links and anchors are checked."""


def broken_links(page: Path) -> list[str]:
    """Relative links of page ([text](path.md#anchor), [text](#anchor)) to a missing file or anchor."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path_text, _, anchor = target.partition("#")
        linked = (page.parent / path_text).resolve() if path_text else page
        if not linked.exists() or (
            anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text())
        ):
            broken.append(target)
    return broken


def test_the_operations_pages_link_only_to_files_and_anchors_that_exist() -> None:
    for name in LINKED_PAGES:
        page = ROOT / "docs" / name
        assert page.exists(), page
        assert broken_links(page) == [], name


def section_bodies(markdown: str) -> dict[str, str]:
    """Level-3 heading -> the text under it, up to the next heading."""
    bodies: dict[str, str] = {}
    current = None
    for line in markdown.splitlines():
        match = re.match(r"(#{1,6}) (.+)", line)
        if match:
            current = match.group(2).strip() if len(match.group(1)) == 3 else None
            if current is not None:
                bodies[current] = ""
        elif current is not None:
            bodies[current] += line + "\n"
    return bodies


def test_the_sections_marked_warning_event_are_the_reasons_that_record_one() -> None:
    bodies = section_bodies(DOC.read_text())
    marked = {name for name, body in bodies.items() if body.lstrip().startswith("**Warning Event.**")}
    assert marked == {str(reason) for reason in decide.EVENT_REASONS}
