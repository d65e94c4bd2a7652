"""The docs, the README and the CRD descriptions (`kubectl explain`) say only what works.

NOT_YET is the one list of features that are planned but not built. Any text
that mentions one of them must say so: the convention is that the block the
mention sits in contains the words "not yet" (for instance "(not yet
built)"). A block is a Markdown paragraph, list item, table row or heading,
or one CRD `description` string. Fenced code blocks are not scanned.

A whole section may be marked at once: a heading that says "not yet", or
whose first block does (a one-line note such as "(Not yet built: landing
with issue 24.)"), marks every block under it up to the next heading of its
level or above; a CRD description that says "not yet" marks the descriptions
of every field under it. That is how the API of a feature whose controller
is still being written is documented, as if built, under one note.

When a feature is built, delete its entry here and rewrite its "not yet"
text; when a new one is planned and documented, add it. Each entry names the
issue that plans it and what its code would look like (`built_if`): once the
code has it, the entry fails until it is deleted. Each entry is also
mentioned, marked, somewhere (the README's "what does not yet" list), so
readers learn what is missing and the check runs over real text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs
import yaml

ROOT = Path(__file__).resolve().parents[2]

MARKER = re.compile(r"\bnot yet\b", re.IGNORECASE)
"""What marks a block as describing a planned feature rather than a working one."""


@attrs.frozen
class NotYet:
    """A planned feature and the phrases that describe it (case-insensitive regexes)."""

    name: str
    patterns: tuple[str, ...]
    examples: tuple[str, ...]
    """Unmarked claims the patterns must catch: proof that each entry can fail."""
    issue: int = 0
    """The issue that plans the feature, or the one that built its first part and left it for later."""
    built_if: tuple[tuple[str, str], ...] = ()
    """(glob under the repository, regex): a match means the code has the feature now."""

    def mentions(self, text: str) -> Iterator[re.Match[str]]:
        for pattern in self.patterns:
            yield from re.finditer(pattern, text, re.IGNORECASE)


NOT_YET: tuple[NotYet, ...] = (
    NotYet(
        "restoring a backup into an existing cluster, and incremental backups",
        (r"\brestor\w* (?:a backup )?into an existing\s+cluster\b", r"\bincremental backups?\b"),
        ("Restore a backup into an existing cluster.", "Incremental backups save space."),
        issue=24,
        built_if=(("valkey_operator/api/*.py", r"(?i)incremental|restore_into|restoreInto"),),
    ),
    NotYet(
        "a node back on its claim catching up by partial resync",
        (r"\bpartial\s+resync\b",),
        ("A node back on its claim needs only a partial resync.",),
        issue=23,
        built_if=(("controllers/cluster/decision/*.py", r"(?i)partial.?resync"),),
    ),
)


@attrs.frozen
class Block:
    where: str
    text: str
    marked: bool = False
    """Inside a section (or under a CRD description) that says "not yet" as a whole."""


@attrs.frozen
class Finding:
    where: str
    feature: str
    sentence: str

    def __str__(self) -> str:
        return f"{self.where}: [{self.feature.split(':')[0]}] {self.sentence}"


# ---- reading blocks ------------------------------------------------------------------------------
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s")
_FENCE = re.compile(r"^\s*(```|~~~)")


_HEADING = re.compile(r"^(#+)\s")


def markdown_blocks(text: str, name: str) -> Iterator[Block]:
    """Paragraphs, list items, table rows and headings, each marked when its section says "not yet"
    (a heading belongs to its own section, so the note under it marks it too)."""
    sections: list[tuple[int, bool]] = []  # (heading level, marked), outermost first
    heading: Block | None = None  # the innermost section's heading, until its first block is seen

    def within() -> bool:
        return any(marked for _, marked in sections)

    for block in _plain_blocks(text, name):
        found = _HEADING.match(block.text)
        if heading is not None:
            if not found and MARKER.search(block.text):
                sections[-1] = (sections[-1][0], True)
            yield attrs.evolve(heading, marked=within())
            heading = None
        if found:
            level = len(found.group(1))
            while sections and sections[-1][0] >= level:
                sections.pop()
            sections.append((level, bool(MARKER.search(block.text))))
            heading = block
        else:
            yield attrs.evolve(block, marked=within())
    if heading is not None:
        yield attrs.evolve(heading, marked=within())


def _plain_blocks(text: str, name: str) -> Iterator[Block]:
    """Paragraphs, list items, table rows and headings; fenced code is skipped."""
    lines: list[str] = []
    start = 0
    fenced = False

    def flush() -> Iterator[Block]:
        if lines:
            yield Block(f"{name}:{start}", " ".join(line.strip() for line in lines))
            lines.clear()

    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            yield from flush()
            fenced = not fenced
            continue
        if fenced:
            continue
        single = line.lstrip().startswith(("#", "|"))
        if not line.strip() or single or _LIST_ITEM.match(line):
            yield from flush()
        if not line.strip():
            continue
        if single:
            yield Block(f"{name}:{number}", line.strip())
            continue
        if not lines:
            start = number
        lines.append(line)
    yield from flush()


def descriptions(node: Any, path: str, marked: bool = False) -> Iterator[tuple[str, str, bool]]:
    """(path, description, whether it or a description above it says "not yet")."""
    if isinstance(node, dict):
        own = node.get("description")
        if isinstance(own, str):
            marked = marked or bool(MARKER.search(own))
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                yield path or ".", value, marked
            else:
                yield from descriptions(value, f"{path}.{key}", marked)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from descriptions(item, f"{path}[{index}]", marked)


def crd_blocks(text: str, name: str) -> Iterator[Block]:
    for path, description, marked in descriptions(yaml.safe_load(text), ""):
        yield Block(f"{name} {path}", " ".join(description.split()), marked)


def documents() -> Iterator[Block]:
    for path in sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]):
        yield from markdown_blocks(path.read_text(), str(path.relative_to(ROOT)))
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        yield from crd_blocks(path.read_text(), str(path.relative_to(ROOT)))


# ---- checking ------------------------------------------------------------------------------------
_SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+(?=[A-Z`*(\"])")


def sentence_around(text: str, start: int) -> str:
    begin = 0
    for match in _SENTENCE_END.finditer(text):
        if match.end() > start:
            end = match.start()
            return text[begin:end].strip()
        begin = match.end()
    return text[begin:].strip()


def unmarked(block: Block, features: tuple[NotYet, ...] = NOT_YET) -> Iterator[Finding]:
    """Mentions of a not-yet feature in a block that does not say "not yet"."""
    plain = block.text.replace("`", "").replace("**", "")
    if block.marked or MARKER.search(plain):
        return
    seen: set[Finding] = set()
    for feature in features:
        for match in feature.mentions(plain):
            finding = Finding(block.where, feature.name, sentence_around(plain, match.start()))
            if finding not in seen:
                seen.add(finding)
                yield finding


def built(feature: NotYet) -> list[str]:
    """Where the code already has the feature (file and the matching line)."""
    found = []
    for pattern, regex in feature.built_if:
        for path in sorted(ROOT.glob(pattern)):
            for line in path.read_text().splitlines():
                if re.search(regex, line):
                    found.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    return found


def mentioned(feature: NotYet, blocks: Iterable[Block]) -> list[str]:
    return [block.where for block in blocks if list(feature.mentions(block.text.replace("`", "")))]


# ---- tests ---------------------------------------------------------------------------------------
def test_the_not_yet_list_is_real() -> None:
    """Not empty (an empty list checks nothing), each entry planned in an issue, not yet in the
    code, and told to readers somewhere (marked, which the next test checks)."""
    assert NOT_YET, "NOT_YET is empty: the docs-truth checks below would loop over nothing"
    blocks = list(documents())
    for feature in NOT_YET:
        assert feature.issue, f"{feature.name}: which issue plans it?"
        assert feature.examples and feature.built_if, feature.name
        assert not built(feature), (
            f"{feature.name} is in the code now: delete its NOT_YET entry and rewrite its "
            f'"not yet" text: {built(feature)[:3]}'
        )
        assert mentioned(feature, blocks), (
            f"{feature.name}: no doc says it is not yet built (the README should)"
        )


def test_docs_and_crd_descriptions_mention_unbuilt_features_only_as_not_yet() -> None:
    findings = [str(finding) for block in documents() for finding in unmarked(block)]
    assert not findings, (
        'these describe an unbuilt feature as working; rewrite them to the truth or say "not yet" '
        "in the same paragraph, list item, table row or description:\n" + "\n".join(findings)
    )


def test_every_entry_catches_its_examples_and_a_marker_silences_them() -> None:
    assert NOT_YET
    for feature in NOT_YET:
        for example in feature.examples:
            assert list(feature.mentions(example)), (feature.name, example)
            assert list(unmarked(Block("example", example))), example
            marked = Block("example", example + " (Not yet built.)")
            assert not list(unmarked(marked)), example


def test_a_claim_the_docs_made_before_they_were_rewritten_is_caught() -> None:
    """A claim of an unbuilt feature spread over lines of one paragraph is one finding (checked with
    the Helm chart's entry from before the chart was built)."""
    chart = NotYet("the Helm chart", (r"\binstall\w* (?:it |the operator )?with helm\b",), ())
    page = "Installing is easy.\nPlatform teams install the operator with Helm\nand a values file.\n"
    blocks = markdown_blocks(page, "page.md")
    findings = [finding for block in blocks for finding in unmarked(block, (chart,))]
    assert findings == [
        Finding(
            "page.md:1", "the Helm chart", "Platform teams install the operator with Helm and a values file."
        )
    ]


def test_blocks_are_paragraphs_list_items_table_rows_and_description_strings() -> None:
    page = "# Title\n\nOne paragraph\nwrapped.\n- an item\n  continued\n| a | row |\n```\ncode rolls\n```\n"
    assert [block.text for block in markdown_blocks(page, "p")] == [
        "# Title",
        "One paragraph wrapped.",
        "- an item continued",
        "| a | row |",
    ]
    crd = "spec:\n  description: Top.\n  properties:\n    a:\n      description: Inner\n        text.\n"
    assert [(b.where, b.text) for b in crd_blocks(crd, "c.yaml")] == [
        ("c.yaml .spec", "Top."),
        ("c.yaml .spec.properties.a", "Inner text."),
    ]


def test_a_section_or_a_description_marked_as_a_whole_silences_what_is_under_it_only() -> None:
    backups = NotYet(
        "backups (an example feature)",
        (
            r"\bValkeyBackups?\b",
            r"\bspec\.(?:backup|restore)\b",
            r"\brestor\w* (?:\w+ ){0,3}from (?:a )?backup\b",
        ),
        ("Create a ValkeyBackup.",),
    )
    page = (
        "# Page\n\n## Backups\n\n(Not yet built: landing with issue 24.)\n\n"
        "Create a ValkeyBackup to snapshot every shard.\n\n### Schedules\n\n"
        "| `spec.backup` | object |\n\n## Next\n\nCreate a ValkeyBackup to snapshot every shard.\n\n"
        "## Backups (not yet)\n\n- Restore a new cluster from a backup with spec.restore.backupName.\n"
    )
    blocks = list(markdown_blocks(page, "p"))
    marked = [False, True, True, True, True, True, False, False, True, True]
    assert [block.marked for block in blocks] == marked
    findings = [finding.where for block in blocks for finding in unmarked(block, (backups,))]
    assert findings == ["p:15"]
    crd = (
        "a:\n  description: ValkeyBackup is a backup. Not yet built.\n  properties:\n    b:\n"
        "      description: Create a ValkeyBackup.\n"
        "c:\n  description: Create a ValkeyBackup.\n"
    )
    found = [finding.where for block in crd_blocks(crd, "c.yaml") for finding in unmarked(block, (backups,))]
    assert found == ["c.yaml .c"]
