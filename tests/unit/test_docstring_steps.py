"""Docstrings that list a function's steps name each step, and the function calls each one named.

A numbered list in a module docstring is read as the truth about the code and drifts from it
silently (decide.py once listed four blockers where the code had six). Where a docstring lists the
steps of one function, each step names, in backquotes, what carries it out, and this test holds
the two sets equal: a step added to the code without its line, or a line left for a step that
went, fails here.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from types import ModuleType

import pytest

from controllers.cluster.decision import decide, plan

NAMED = re.compile(r"`([A-Za-z_][\w.]*)`")


def _numbered_items(module: ModuleType) -> str:
    """The numbered list of the module's docstring: its items and their continuation lines."""
    lines, inside = [], False
    for line in (module.__doc__ or "").splitlines():
        if re.match(r"\d+\.\s", line):
            inside = True
        elif not line.startswith("   "):
            inside = False
        if inside:
            lines.append(line)
    return "\n".join(lines)


def _docstring_names(module: ModuleType) -> set[str]:
    """What the numbered list names in backquotes."""
    return set(NAMED.findall(_numbered_items(module)))


def _resolves(module: ModuleType, dotted: str) -> bool:
    """Whether dotted names a function or class of the module's namespace (or of a module it imports)."""
    target: object = module
    for part in dotted.split("."):
        target = getattr(target, part, None)
        if target is None:
            return False
    return inspect.isfunction(target) or inspect.isclass(target)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _steps_called(module: ModuleType, function: str, calls: re.Pattern[str]) -> set[str]:
    """The names of what `function` calls that are this module's steps (matching `calls`)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(module, function))))
    found = {_dotted(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return {name for name in found if name and calls.fullmatch(name) and _resolves(module, name)}


def _blockers(module: ModuleType) -> dict[str, set[str]]:
    """Per `_blocked` call in decide(): its reason argument -> the names that may stand for it.

    A constant reason stands for itself (its value); a reason read from an object (`x.reason`) for
    the types decide() checks x against or builds x from.
    """
    tree = ast.parse(textwrap.dedent(inspect.getsource(module.decide)))
    blockers: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _dotted(node.func) == "_blocked"):
            continue
        reason = node.args[2]
        if isinstance(reason, ast.Name):
            blockers[reason.id] = {getattr(module, reason.id)}
        elif isinstance(reason, ast.Attribute) and isinstance(reason.value, ast.Name):
            blockers[ast.unparse(reason)] = _types_of(tree, reason.value.id)
    return blockers


def _types_of(tree: ast.AST, variable: str) -> set[str]:
    """Types `variable` is checked against (isinstance) or built from (an assignment's calls)."""
    types = set()
    for node in ast.walk(tree):
        checked = isinstance(node, ast.Call) and _dotted(node.func) == "isinstance"
        if checked and isinstance(node.args[0], ast.Name) and node.args[0].id == variable:
            types.add(ast.unparse(node.args[1]))
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == variable for target in node.targets
        ):
            types |= {
                name
                for call in ast.walk(node.value)
                if isinstance(call, ast.Call)
                if (name := _dotted(call.func))
            }
    return types


STEP_CALLS = re.compile(
    r"_\w+|(upkeep|certificates|data_claims|spread|rollout|membership)\.\w+|failover_request"
)


def test_the_planner_docstring_names_every_step_of_actions_and_no_other() -> None:
    called = _steps_called(plan, "_actions", STEP_CALLS)
    named = {name for name in _docstring_names(plan) if _resolves(plan, name)} - {"membership.first"}
    assert called == named, (
        f"called by _actions but not named in plan.py's docstring: {sorted(called - named)}; "
        f"named but not called: {sorted(named - called)}"
    )
    assert _resolves(plan, "membership.first") and "membership.first" in inspect.getsource(plan.plan_view)


def test_the_decision_docstring_names_every_blocker_decide_has() -> None:
    blockers = _blockers(decide)
    named = _docstring_names(decide)
    missing = sorted(reason for reason, names in blockers.items() if not names & named)
    assert not missing, f"decide() blocks for {missing}, which decide.py's docstring does not name"
    standing = set().union(*blockers.values())
    listed = set(NAMED.findall(_numbered_items(decide).split("\n2.")[0]))
    stale = sorted(listed - standing)
    assert not stale, f"decide.py's docstring names blockers decide() no longer has: {stale}"


@pytest.mark.parametrize(
    "module", ["controllers.cluster.decision.plan", "controllers.cluster.decision.decide"]
)
def test_every_backquoted_step_name_resolves(module: str) -> None:
    loaded = importlib.import_module(module)
    names = {name for name in _docstring_names(loaded) if "." in name or name.startswith("_")}
    broken = sorted(name for name in names if not _resolves(loaded, name) and not name.endswith(".py"))
    assert not broken, f"{module}'s docstring names what does not exist: {broken}"
