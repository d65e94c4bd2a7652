"""Controllers meet only in controllers/shared: none imports another's modules, and nothing loops.

A controller is a package under controllers/ (cluster, backup, config) or a top-level module that
sets one up (image.py, role.py, backup_schedule.py with its pure half). What more than one of them
needs lives in controllers/shared and in the top-level modules every controller is handed
(options, indexes, status, protection); those import no controller. Only controllers/__init__.py,
which wires them all, imports each controller's setup. Imports are read from the source with ast,
function-level and TYPE_CHECKING ones included: an import hidden there is still a dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

from test_boundaries import IMPURE

ROOT = Path(__file__).resolve().parents[2]
CONTROLLERS = ROOT / "controllers"
SHARED_UNITS = frozenset({"shared", "options", "indexes", "status", "protection"})
"""controllers/shared and the top-level modules every controller is handed: owned by none."""
WIRING = "controllers"
"""controllers/__init__.py: setup_all installs every controller, so it imports each one."""
UNIT_OF_TOP_LEVEL = {"backup_schedule_decision": "backup_schedule"}
"""Top-level modules that are half of another top-level controller (its pure decision)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def known_modules() -> dict[str, Path]:
    return {module_name(path): path for path in CONTROLLERS.rglob("*.py")}


def imports_of(path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The controllers modules path imports, relative imports resolved, `from pkg import mod` as pkg.mod."""
    this = module_name(path)
    package = this if is_package(path) else this.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            found.add(origin)
            found.update(
                f"{origin}.{alias.name}" for alias in node.names if f"{origin}.{alias.name}" in modules
            )
    return {name for name in found if name in modules and name != this}


def import_graph() -> dict[str, set[str]]:
    modules = known_modules()
    return {name: imports_of(path, modules) for name, path in modules.items()}


def unit_of(module: str) -> str:
    """The controller (or shared unit) a module belongs to: its first name under controllers."""
    parts = module.split(".")
    if len(parts) == 1:
        return WIRING
    return UNIT_OF_TOP_LEVEL.get(parts[1], parts[1])


def package_of(module: str, modules: Mapping[str, Path]) -> str:
    """The package a module sits in; a top-level module of controllers/ counts as its own node."""
    if is_package(modules[module]):
        return module
    parent = module.rpartition(".")[0]
    return module if parent == WIRING else parent


def cross_controller_imports(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Every import from one controller into another's modules, or from the shared layer into one."""
    wrong = []
    for module, imported in graph.items():
        source = unit_of(module)
        for name in imported:
            target = unit_of(name)
            if source in (target, WIRING) or target in SHARED_UNITS:
                continue
            layer = "the shared layer" if source in SHARED_UNITS else f"controller {source}"
            wrong.append(f"{module} ({layer}) imports {name} (controller {target})")
    return sorted(wrong)


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def package_graph(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    modules = known_modules()
    packages: dict[str, set[str]] = {}
    for module, imported in graph.items():
        source = package_of(module, modules)
        targets = {package_of(name, modules) for name in imported}
        packages.setdefault(source, set()).update(targets - {source})
    return packages


def test_the_graph_sees_every_controller_and_resolves_module_imports() -> None:
    graph = import_graph()
    assert {unit_of(name) for name in graph} >= {"cluster", "backup", "config", "shared", "image", "role"}
    # `from controllers.cluster.render import exporter` is an import of the exporter module itself.
    assert "controllers.cluster.render.exporter" in graph["controllers.cluster.render.pods"]
    # the backup controller reads the pod index from the shared layer, no longer from the cluster's.
    assert "controllers.shared.pod_index" in graph["controllers.backup.reconciler"]


def test_no_controller_imports_another_controllers_modules() -> None:
    assert cross_controller_imports(import_graph()) == []


def test_no_import_cycle_between_packages() -> None:
    assert cycles(package_graph(import_graph())) == []


def test_no_import_cycle_between_modules() -> None:
    """render/ once looped (exporter <-> context, exporter <-> pods) through function-level and
    TYPE_CHECKING imports; any loop, hidden or not, fails here."""
    assert cycles(import_graph()) == []


CLOCKS = frozenset({"time", "now", "monotonic", "SystemRandom"})
"""Calls that read a clock or a CSPRNG (time.time(), datetime.now(), monotonic(), SystemRandom())."""


def clock_calls(path: Path) -> list[str]:
    """The clock reads a module makes: calls, so a docstring that names one does not count."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if name in CLOCKS:
                found.append(f"{name}() at line {node.lineno}")
    return found


def test_the_shared_modules_the_decision_reads_are_as_pure_as_the_decision() -> None:
    """observation.py and versions.py left decision/ for the shared layer: the rule that keeps
    decide() replayable (test_boundaries.IMPURE, no clock) follows them, and what they import."""
    graph = import_graph()
    decision = [name for name in graph if name.startswith("controllers.cluster.decision.")]
    reached: set[str] = set()
    todo = [name for module in decision for name in graph[module] if unit_of(name) == "shared"]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(graph[name])
    assert {"controllers.shared.observation", "controllers.shared.versions"} <= reached, reached
    modules = known_modules()
    for name in sorted(reached):
        path = modules[name]
        imported = {
            alias.name if isinstance(node, ast.Import) else node.module or ""
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        bad = sorted(i for i in imported if i in IMPURE or i.split(".")[0] in {"asyncio", "time"})
        assert not bad, f"{name}, which the decision imports, imports {bad}"
        assert not clock_calls(path), f"{name}, which the decision imports, calls {clock_calls(path)}"


def test_the_checks_catch_what_they_forbid() -> None:
    """The rules on made-up graphs: a borrowed internal, the shared layer importing a controller, a loop."""
    borrowed = {
        "controllers.backup.reconciler": {"controllers.cluster.reconciler", "controllers.shared.probe"}
    }
    assert cross_controller_imports(borrowed) == [
        "controllers.backup.reconciler (controller backup) imports controllers.cluster.reconciler"
        " (controller cluster)"
    ]
    upward = {"controllers.shared.names": {"controllers.config.reconciler"}}
    assert len(cross_controller_imports(upward)) == 1
    wiring = {"controllers": {"controllers.cluster.reconciler", "controllers.backup.reconciler"}}
    assert cross_controller_imports(wiring) == []
    assert clock_calls(CONTROLLERS / "cluster" / "reconciler.py"), "the reconciler stamps the pass"
    loop = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(loop) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
