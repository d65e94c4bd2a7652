"""Dependency rules of the codebase: the core embeds anywhere; controllers sit on top."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(package: Path) -> dict[Path, set[str]]:
    found: dict[Path, set[str]] = {}
    for path in package.rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[path] = names
    return found


def test_core_imports_nothing_valkey_specific() -> None:
    allowed_own = "valkey_operator.core"
    for path, names in imported_modules(ROOT / "valkey_operator" / "core").items():
        for name in names:
            top = name.split(".")[0]
            assert top != "controllers", f"{path} imports {name}"
            assert top != "valkey", f"{path} imports the Valkey client ({name})"
            if top == "valkey_operator":
                assert name == allowed_own or name.startswith(allowed_own + "."), f"{path} imports {name}"


def test_only_the_entry_point_imports_controllers() -> None:
    """controllers -> core/api/valkey, never back; the operator's entry point wires them."""
    entry_point = {ROOT / "valkey_operator" / "operator.py"}
    for path, names in imported_modules(ROOT / "valkey_operator").items():
        if path not in entry_point:
            assert not any(name.split(".")[0] == "controllers" for name in names), path


def test_the_object_store_layer_knows_neither_controllers_nor_kubernetes_nor_valkey() -> None:
    """objectstore speaks S3 only: controllers call it, it never calls back or reaches past S3."""
    found = imported_modules(ROOT / "valkey_operator" / "objectstore")
    assert len(found) >= 4, found
    for path, names in found.items():
        for name in names:
            top = name.split(".")[0]
            assert top not in {"controllers", "valkey", "kubernetes_asyncio"}, f"{path} imports {name}"
            if top == "valkey_operator":
                assert name.startswith("valkey_operator.objectstore"), f"{path} imports {name}"


CLUSTER = ROOT / "controllers" / "cluster"
DECISION = sorted((CLUSTER / "decision").glob("*.py"))
"""The pure modules decide() is made of: controllers/cluster/decision/."""
IMPURE = {
    "controllers.cluster.reconciler",
    "controllers.shared.probe",
    "controllers.cluster.actor",
    "controllers.cluster.metrics",
    "controllers.cluster.secrets",
    "asyncio",
    "time",
    "prometheus_client",
    "valkey_operator.core.client",
    "valkey_operator.valkey.admin",
}
"""What gathers, acts, remembers or reads a clock: the decision never imports it."""


def test_the_decision_imports_nothing_that_gathers_acts_remembers_or_reads_a_clock() -> None:
    found = {path: names for path, names in imported_modules(CLUSTER).items() if path in DECISION}
    assert len(found) == len(DECISION) > 10, sorted(set(DECISION) - found.keys())
    for path, names in found.items():
        bad = sorted(name for name in names if name in IMPURE or name.split(".")[0] in {"asyncio", "time"})
        assert not bad, f"{path.name} imports {bad}"
        source = path.read_text()
        for clock in ("time.time(", "datetime.now(", ".now(datetime", "monotonic(", "SystemRandom("):
            assert clock not in source, f"{path.name} reads a clock or a CSPRNG: {clock}"


OBSERVE_AND_ACT = ("reconciler.py", "actor.py", "gather.py", "metrics.py")
"""The modules around decide(): they gather, act, write and export, and decide nothing."""
DECISION_ENTRY_POINTS = {
    "run_pass",
    "gathering_stops",
    "commands_to_probe",
    "recorded_status",
    "slot_holders",
    "owned_names",
    "written_names",
    "object_key",
    "skipped",
}
"""The only functions of decision/ those modules may call: the pass itself, and what says which
facts to read (whose objects, which commands, which memory) or which action to leave out after a
failure. Everything else they import from decision/ is a type (the facts, the actions, the
decision, the memory)."""


def decision_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of everything path imports from controllers.cluster.decision."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "controllers.cluster.decision"
        ):
            found += [(node.module or "", alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("controllers.cluster.decision") for a in node.names), path
    return found


def test_the_reconciler_and_actor_call_no_decision_but_the_pass() -> None:
    """Everything a pass decides is decided in decide(): the reconciler, the gatherer, the actor and
    the metrics may import decision/'s types and its few entry points, never one of its decisions
    (admit, classified, remember_refusals, migration_counts, rbac_denied, conflicts, decide...)."""
    import importlib
    import inspect

    checked = 0
    for name in OBSERVE_AND_ACT:
        for module, imported in decision_imports(CLUSTER / name):
            found = getattr(importlib.import_module(module), imported)
            checked += 1
            if not inspect.isfunction(found):
                continue  # a type (facts, actions, the decision, the memory) or a constant
            assert imported in DECISION_ENTRY_POINTS, (
                f"{name} imports {module}.{imported}: a decision belongs in decide(), called through run_pass"
            )
    assert checked > 20, checked


def context_builds(source: str) -> list[int]:
    """Lines where source builds a pass's Context (`Context(...)`, `Context.of(...)`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            func = func.value
        if isinstance(func, ast.Name) and func.id == "Context":
            found.append(node.lineno)
    return sorted(found)


def test_the_pass_context_is_built_in_decide_alone() -> None:
    """What a pass knows besides what it observed (the stored status, the Memory, admission) enters
    in Facts and becomes the planner's Context in decide(), nowhere else: the gatherer and the probe
    build only the Observation, so neither can hand the planner a remembered input."""
    builders = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "controllers").rglob("*.py")
        if path.name != "context.py" and context_builds(path.read_text())
    }
    assert builders == {"controllers/cluster/decision/decide.py"}, builders
    made_up = "def observe(pods):\n    return Observation(pods=pods), Context.of(now=0)\n\nContext(now=1)\n"
    assert context_builds(made_up) == [2, 4]
