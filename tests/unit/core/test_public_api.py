"""The core's public API is `__all__`, the list in docs/embedding.md, and all the examples import."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from valkey_operator import core

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "embedding.md"
EXAMPLES = sorted((ROOT / "examples").glob("*/operator.py"))


def documented() -> set[str]:
    """The backticked names in the first cell of each row of the doc's public API table."""
    text = DOC.read_text()
    section = text[text.index("## The public API") :]
    section = section[: section.index("\n## ", 1)]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", line.split("|")[1]))
    return names


def core_imports(path: Path) -> tuple[set[str], list[str]]:
    """Names an example imports from valkey_operator.core, and any import of a core submodule."""
    names: set[str] = set()
    submodules = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("valkey_operator"):
            if node.module == "valkey_operator.core":
                names.update(alias.name for alias in node.names)
            else:
                submodules.append(node.module or "")
    return names, submodules


def test_all_is_exactly_the_documented_list() -> None:
    assert set(core.__all__) == documented()
    assert len(core.__all__) == len(set(core.__all__))
    for name in core.__all__:
        assert hasattr(core, name), name


def test_internals_stay_out_of_the_public_surface() -> None:
    for internal in (
        "RestClient",
        "Obj",
        "Store",
        "SharedInformerFactory",
        "FuncHandler",
        "ControllerBuilder",
    ):
        assert internal not in core.__all__


def test_examples_use_only_the_public_api_and_stay_small() -> None:
    assert len(EXAMPLES) >= 3
    for example in EXAMPLES:
        names, submodules = core_imports(example)
        assert submodules == [], f"{example.name} imports internals: {submodules}"
        assert names <= set(core.__all__), names - set(core.__all__)
        assert len(example.read_text().splitlines()) < 100, example
        test = ROOT / "tests" / "integration" / "examples" / f"test_{example.parent.name}.py"
        assert len(test.read_text().splitlines()) < 100, test
