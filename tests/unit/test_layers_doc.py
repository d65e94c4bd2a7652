"""docs/cluster-internals.md's table of layers names the modules that exist, and every one of them.

The table is how a reader finds where a part lives; a module moved or added without it (or a row
naming one that is gone) fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cluster-internals.md"


def _row(title: str) -> str:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith(f"| {title} |")]
    assert len(rows) == 1, f"docs/cluster-internals.md: one table row for {title!r}, found {len(rows)}"
    return rows[0]


def _modules(package: Path) -> set[str]:
    return {path.name for path in package.glob("*.py") if path.name != "__init__.py"}


def test_the_shared_row_names_every_shared_module_and_no_other() -> None:
    named = set(re.findall(r"`([a-z_]+\.py)`", _row("Shared")))
    assert named == _modules(ROOT / "controllers" / "shared")


def test_the_rows_name_only_paths_that_exist() -> None:
    for title in (
        "Wiring",
        "ValkeyCluster controller",
        "ValkeyBackup controller",
        "Backup schedule controller",
    ):
        for path in re.findall(r"`(controllers/[a-z_/]+(?:\.py)?)`", _row(title)):
            assert (ROOT / path).exists(), f"{title}: {path} does not exist"


def test_the_cluster_controller_row_names_its_packages() -> None:
    row = _row("ValkeyCluster controller")
    packages = {
        path.name for path in (ROOT / "controllers" / "cluster").iterdir() if (path / "__init__.py").exists()
    }
    for package in packages:
        assert f"`{package}/`" in row, f"controllers/cluster/{package}/ is not named in the table"


def _listed_after(lead: str) -> list[str]:
    """The backquoted names of the sentence in the doc that starts with lead, up to its full stop."""
    text = " ".join(DOC.read_text().split())
    start = text.index(lead)
    return re.findall(r"`([a-z_]+)`", text[start : text.index(".", start + len(lead))])


def test_the_observed_and_the_context_fields_the_doc_lists_are_the_codes() -> None:
    """The doc says what the Observation holds and what the Context adds: a field moved between them
    (a stored-status or memory field put back on the Observation) must move in the doc too."""
    import attrs

    from controllers.cluster.decision.context import Context
    from controllers.shared.observation import Observation

    observed = _listed_after("is only what the pass read from the cache and the servers:")
    assert observed == [field.name for field in attrs.fields(Observation)]
    context = _listed_after("before the View:")
    assert context == [field.name for field in attrs.fields(Context)]
