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

The other way round, NOT_YET is the only place a page may take a "not yet
built" claim from: every claim (CLAIM: "not yet built", "not built yet",
"not yet implemented", a bare "not yet" ending a phrase such as "Not yet:")
must name an entry in its sentence, so a page that still calls a built
feature unbuilt (the chart README on ValkeyBackup, the config reference on
claims) fails. A claim that names none is allowed only where it introduces
claims that do: a heading over a section that names entries, a sentence
ending in ":" over list items that each name one, or a section's first
block (the heading is read with it).

The pages are every one users read (user_pages()): every Markdown page
outside tests/ and hidden folders (the README, docs/, the READMEs of the
chart, crds/ and bench/), the chart's NOTES.txt, and the CRD descriptions in
crds/ and in the chart. On them too: `pip install` of this project only from
a path (no package index serves it); relative links, and sections named in
plain text, only to files, anchors and sections that exist; no link to a
home of this project on a code host (it has none: runbooks link the
repository path, see the chart's prometheusRule.runbookBaseURL); a page
sent to "for" a kind shows how to create it; and the first-cluster commands
of install.md and NOTES use only what the examples create.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml
from test_troubleshooting_doc import anchors, github_anchor

from controllers.cluster.render.user_passwords import URI_KEY, user_secret_name

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
    NotYet(
        "replacing a data claim whose Kubernetes node is gone for good",
        (r"\breplac\w* a claim whose (?:Kubernetes )?node\b",),
        ("Replacing a claim whose Kubernetes node is gone for good rebuilds it elsewhere.",),
        issue=23,
        built_if=(("controllers/cluster/decision/*.py", r"(?i)node_?gone|NodeGone|node_?lost|NodeLost"),),
    ),
    NotYet(
        "applying a changed reclaimPolicy to existing claims",
        (
            r"\bchang\w* (?:the )?reclaimPolicy on existing claims\b",
            r"\bappl\w* a changed (?:reclaimPolicy|policy) to claims\b",
        ),
        ("Changing reclaimPolicy on existing claims re-owns them.",),
        issue=23,
        built_if=(("controllers/cluster/decision/*.py", r"(?i)reclaim"),),
    ),
    NotYet(
        "the chaos run verifying valkey-benchmark's own keys",
        (r"\bvalkey-benchmark's own keys verified\b",),
        ("The chaos run has a load of valkey-benchmark's own keys verified.",),
        issue=21,
        built_if=(("testbed/valkey_testbed/chaos/*.py", r"(?i)benchmark.{0,40}verif|verif.{0,40}benchmark"),),
    ),
    NotYet(
        "the chaos run rolling the image of a TLS cluster",
        (r"\ban image roll on a TLS cluster\b",),
        ("The chaos run does an image roll on a TLS cluster.",),
        issue=21,
        built_if=(("testbed/valkey_testbed/chaos/*.py", r"(?i)TLS_ROLL|second tls image|tls_images"),),
    ),
    NotYet(
        "the chaos run's faults overlapping one another",
        (r"\bfaults overlapping one another\b",),
        ("The chaos run has faults overlapping one another.",),
        issue=21,
        built_if=(("testbed/valkey_testbed/chaos/*.py", r"(?i)overlap"),),
    ),
    NotYet(
        "external access through a hostname pattern (an Ingress or Gateway in front of the nodes)",
        (r"\bhostname pattern\b",),
        ("A hostname pattern announces each node behind an Ingress.",),
        issue=40,
        built_if=(("valkey_operator/api/external.py", r"(?i)hostname_?pattern|hostnamePattern"),),
    ),
    NotYet(
        "announcing a node's ExternalIP (or another address type) for NodePort",
        (r"\bannounc\w* a node's ExternalIP\b",),
        ("Announcing a node's ExternalIP works for NodePort.",),
        issue=40,
        built_if=(("valkey_operator/api/external.py", r"(?i)ExternalIP|address_?type"),),
    ),
    NotYet(
        "IPv6 external addresses",
        (r"\bIPv6 external addresses\b",),
        ("IPv6 external addresses are announced.",),
        issue=40,
        built_if=(("controllers/cluster/decision/announce.py", r"(?i)client-ipv6"),),
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


_NOT_READ = frozenset({"tests", "node_modules", "build", "dist"})
"""Top-level folders whose Markdown no user reads (test fixtures, build output)."""
_TEMPLATE_ACTION = re.compile(r"\{\{-?.*?-?\}\}")


def markdown_pages() -> list[Path]:
    """Every Markdown page users read: all of the repository's but tests' and hidden folders'."""
    pages = []
    for path in ROOT.rglob("*.md"):
        parts = path.relative_to(ROOT).parts
        if parts[0] in _NOT_READ or any(part.startswith(".") or part.endswith(".egg-info") for part in parts):
            continue
        pages.append(path)
    return sorted(pages)


def notes_pages() -> list[Path]:
    """The charts' NOTES.txt: what `helm install` prints."""
    return sorted(ROOT.glob("charts/*/templates/NOTES.txt"))


def crd_files() -> list[Path]:
    """The CRDs in crds/ and the copies the chart carries (what `kubectl explain` prints)."""
    return sorted([*ROOT.glob("crds/*.yaml"), *ROOT.glob("charts/*/files/crds/*.yaml")])


def user_pages() -> list[Path]:
    return [*markdown_pages(), *notes_pages(), *crd_files()]


def page_text(path: Path) -> str:
    """The text a reader sees: a NOTES template without its {{ actions }}."""
    text = path.read_text()
    return _TEMPLATE_ACTION.sub("", text) if path.name == "NOTES.txt" else text


def page_blocks(path: Path) -> list[Block]:
    name = str(path.relative_to(ROOT))
    if path.suffix == ".yaml":
        return list(crd_blocks(path.read_text(), name))
    return list(markdown_blocks(page_text(path), name))


def documents() -> Iterator[Block]:
    for path in user_pages():
        yield from page_blocks(path)


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


# ---- "not yet built" claims name a NOT_YET entry -------------------------------------------------
CLAIM = re.compile(
    r"\bnot\s+yet\s+built\b|\bnot\s+built\s+yet\b"
    r"|\bnot\s+yet\s+(?:implemented|supported|available|possible|done|written|shipped)\b"
    r"|\bnot\s+yet\b(?=\s*(?:[.,:;)]|$))",
    re.IGNORECASE,
)
"""A claim that something is not built: the convention's phrases, or "not yet" ending a phrase
("Not yet:", "(not yet)"). Not "not yet valid", "not yet observed": those describe state."""


def _plain(text: str) -> str:
    return text.replace("`", "").replace("**", "")


def names_an_entry(text: str, features: tuple[NotYet, ...]) -> bool:
    return any(True for feature in features for _ in feature.mentions(_plain(text)))


def _level(block: Block) -> int:
    found = _HEADING.match(block.text)
    return len(found.group(1)) if found else 0


def _section(blocks: list[Block], index: int, level: int) -> list[Block]:
    """The blocks after index up to the next heading of level or above."""
    section = []
    for block in blocks[index + 1 :]:
        if 0 < _level(block) <= level:
            break
        section.append(block)
    return section


def unregistered_claims(blocks: list[Block], features: tuple[NotYet, ...] = NOT_YET) -> Iterator[Finding]:
    """Claims of one page's blocks (in order) that name no NOT_YET entry, and introduce none."""
    for index, block in enumerate(blocks):
        plain = _plain(block.text)
        for match in CLAIM.finditer(plain):
            sentence = sentence_around(plain, match.start())
            if names_an_entry(sentence, features):
                continue
            if _level(block):  # a heading over claims: its section must name entries
                introduced = _section(blocks, index, _level(block))
                if any(names_an_entry(b.text, features) for b in introduced):
                    continue
            elif (
                sentence.endswith(":")
                and index + 1 < len(blocks)
                and _LIST_ITEM.match(blocks[index + 1].text)
            ):
                items = []
                for item in blocks[index + 1 :]:
                    if not _LIST_ITEM.match(item.text):
                        break
                    items.append(item)
                if all(names_an_entry(item.text, features) for item in items):
                    continue
            elif index and _level(blocks[index - 1]):  # a section's note: read with its heading
                heading = blocks[index - 1]
                under = [heading, *_section(blocks, index - 1, _level(heading))]
                if any(names_an_entry(b.text, features) for b in under):
                    continue
            yield Finding(block.where, "not yet built, but no NOT_YET entry", sentence)


# ---- install lines, links, pages sent to ---------------------------------------------------------
_PIP = re.compile(r"\bpip3?\s+install\b([^\n`|&;#]*)")
_PIP_VALUE_FLAGS = frozenset(
    {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "-t", "--target"}
)
_LOCAL = re.compile(r"^(?:\.{1,2}|~|/)[\w./~-]*(?:\[[\w,-]+\])?$")
"""A checkout or a path to one, with extras: `.`, `.[dev]`, `/path/to/checkout[testing]`."""


def pip_targets(text: str) -> Iterator[str]:
    """What each `pip install` in text installs (flags and their values left out)."""
    for match in _PIP.finditer(text):
        try:
            words = shlex.split(match.group(1))
        except ValueError:
            words = match.group(1).split()
        skip = False
        for word in words:
            if skip:
                skip = False
            elif word in _PIP_VALUE_FLAGS:
                skip = True
            elif not word.startswith("-"):
                yield word


def project_name() -> str:
    """The distribution's name, from setup.cfg's [metadata]."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser["metadata"]["name"]


def _normalized(requirement: str) -> str:
    """A requirement's distribution name as an index compares it (PEP 503)."""
    name = re.split(r"[\[<>=!~;@\s]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def uninstallable(path: Path) -> list[str]:
    """`pip install` of this project by name: no package index serves it, so only a path (a checkout)
    installs it. Other projects' names are theirs to serve (py-spy, cattrs in bench/README.md)."""
    ours = _normalized(project_name())
    return [
        f"{path.relative_to(ROOT)}: pip install {word}"
        for word in pip_targets(path.read_text())
        if not _LOCAL.match(word) and _normalized(word) == ours
    ]


_NAMED_SECTION = re.compile(r"\b(docs/[\w/.-]+\.md), \"([^\"]+)\"")
"""A section named in plain text, as NOTES.txt does: docs/install.md, "A first cluster"."""
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HTML_ID = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")
OWN_HOME = re.compile(
    r"https?://(?:www\.)?(?:github\.com|gitlab\.com|bitbucket\.org|codeberg\.org)/(?!valkey-io/)[\w.-]+/valkey-operator\b"
    r"|https?://[\w.-]*gomomento[\w./#-]*",
    re.IGNORECASE,
)
"""A link to a home of this project on a code host, or under the API group's domain: it has none
(operator-image.md), so every such link is made up. The official valkey-io operator is a peer."""


def page_anchors(path: Path) -> set[str]:
    text = path.read_text()
    return anchors(text) | set(_HTML_ID.findall(text))


def broken_link(page: Path, target: str) -> str | None:
    """Why a link of page does not resolve in this repository, or None."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target):
        return None  # https:, mailto:: OWN_HOME checks the hosts
    path_text, _, anchor = target.partition("#")
    linked = (page.parent / path_text).resolve() if path_text else page
    if not linked.exists():
        return f"{target}: no such file"
    if anchor and linked.suffix == ".md" and anchor not in page_anchors(linked):
        return f"{target}: no such anchor"
    return None


def names_a_part(page: Path, name: str) -> bool:
    """page has a heading called name, or a paragraph led by it in bold ("**Node failure.**")."""
    if not page.is_file():
        return False
    text = page.read_text()
    return github_anchor(name) in anchors(text) or f"**{name}.**" in text or f"**{name}**" in text


def link_findings(path: Path) -> list[str]:
    text = path.read_text()
    found = [
        f"{path.relative_to(ROOT)}: {url}: this project has no such home" for url in OWN_HOME.findall(text)
    ]
    if path.suffix == ".md":
        for target in _LINK.findall(text):
            if (why := broken_link(path, target)) is not None:
                found.append(f"{path.relative_to(ROOT)}: {why}")
    for page, name in _NAMED_SECTION.findall(text):  # NOTES: docs/install.md, "A first cluster"
        if not names_a_part(ROOT / page, name):
            found.append(f'{path.relative_to(ROOT)}: {page}, "{name}": no such heading or bold lead-in')
    return found


KINDS = ("ValkeyBackup", "ValkeyCluster", "ValkeyConfig", "ValkeyImage", "ValkeyRole")
_KIND = r"Valkey(?:Backup|Cluster|Config|Image|Role)s?\b"
_SENT_FOR = re.compile(rf"\bfor\s+({_KIND}(?:(?:,\s*(?:and\s+)?|\s+and\s+){_KIND})*)")
"""'for ValkeyConfig, ValkeyRole and ValkeyCluster': what a sentence sends readers to a page for."""
_DOC_PATH = re.compile(r"\bdocs/[\w./-]*")


def shows_how_to_create(text: str, kind: str) -> bool:
    """A manifest of kind, or a `kubectl apply -f` of a repository file holding one."""
    if re.search(rf"^\s*kind:\s*{kind}\s*$", text, re.MULTILINE):
        return True
    for applied in re.findall(r"kubectl(?:\s+-n\s+\S+)?\s+apply\s+(?:-n\s+\S+\s+)?-f\s+(\S+)", text):
        file = ROOT / applied
        if file.is_file() and re.search(rf"^kind:\s*{kind}\s*$", file.read_text(), re.MULTILINE):
            return True
    return False


def sent_for(path: Path, text: str) -> list[str]:
    """A sentence sending readers to pages for some kinds: each page must show how to create each
    (a kind's own reference page counts), or the reader lands on a page that has nothing on it."""
    found = []
    for block in markdown_blocks(text, str(path.relative_to(ROOT))):
        plain = _plain(block.text)
        for match in _SENT_FOR.finditer(plain):
            sentence = sentence_around(plain, match.start())
            kinds = sorted(
                set(re.findall(r"\b(Valkey(?:Backup|Cluster|Config|Image|Role))s?\b", match.group(1)))
            )
            targets = [ROOT / ref.rstrip(".,") for ref in _DOC_PATH.findall(sentence)]
            targets += [
                (path.parent / t.partition("#")[0]).resolve()
                for t in _LINK.findall(block.text)
                if not re.match(r"[a-z]+:", t)
            ]
            for target in targets:
                pages = (
                    sorted(target.rglob("*.md")) if target.is_dir() else [target] if target.is_file() else []
                )
                for kind in kinds:
                    if not any(
                        page.name == f"{kind.lower()}.md" or shows_how_to_create(page.read_text(), kind)
                        for page in pages
                    ):
                        found.append(
                            f"{block.where}: sends readers to {target.relative_to(ROOT)} for {kind}: "
                            + sentence
                        )
    return found


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


# ---- every page users read -----------------------------------------------------------------------
def test_every_page_users_read_is_checked() -> None:
    """The chart's README and NOTES, reference and internals pages, both copies of the CRDs: the
    pages issue 36 found untrue were outside the check before."""
    pages = {str(path.relative_to(ROOT)) for path in user_pages()}
    for page in (
        "README.md",
        "charts/valkey-operator/README.md",
        "charts/valkey-operator/templates/NOTES.txt",
        "docs/reference/valkeyconfig.md",
        "docs/cluster-internals.md",
        "crds/valkeyconfigs.yaml",
        "charts/valkey-operator/files/crds/valkeyconfigs.yaml",
    ):
        assert page in pages, page
    assert {str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")} <= pages
    assert not [page for page in pages if page.startswith("tests/")]


def test_every_not_yet_built_claim_names_a_not_yet_entry() -> None:
    findings = [str(f) for path in user_pages() for f in unregistered_claims(page_blocks(path))]
    assert not findings, (
        'these say "not yet built" of something NOT_YET does not list: if it is built, say what it '
        "does; if it is planned, add its entry (with its issue):\n" + "\n".join(findings)
    )


SAID_BEFORE = (
    (
        "chart README",
        "The chart installs the five CRDs (ValkeyBackup, whose controller is\n"
        "not yet built, ValkeyCluster).\n",
    ),
    (
        "config reference",
        "| `persistence.size` | quantity | Yes | — | A quantity. | Size of each Valkey pod's volume claim "
        "(claims not yet built). May grow (no roll), never shrink. |\n",
    ),
    (
        "internals",
        "## With persistence (rdb or aof)\n\nThe rule is the same. The claims that hold `/data` are\n"
        "not yet built (the cluster side of SPEC 1.6).\n",
    ),
    (
        "internals table",
        "| `dir` | `/data` | With persistence, the pod's claim "
        "(not yet built: until then the same emptyDir) |\n",
    ),
    ("a section note", "## Claims\n\n(Not yet built: landing with issue 23.)\n\nEach node has a claim.\n"),
)
"""What the pages said before issue 36 (built features called unbuilt), and a note over a section."""


def test_a_claim_that_names_no_entry_is_caught_and_an_introduction_is_not() -> None:
    for what, page in SAID_BEFORE:
        findings = list(unregistered_claims(list(markdown_blocks(page, what))))
        assert findings, what
    description = "Size of each claim (claims not yet built)."
    assert list(unregistered_claims(list(crd_blocks(f"a:\n  description: {description}\n", "c.yaml"))))
    readme = (
        "## What works today, and what does not yet\n\nClusters work.\n\nPlanned, and not yet built:\n"
        "- Persistence: no partial resync yet.\n- Backups: incremental backups: not yet built.\n"
    )
    assert list(unregistered_claims(list(markdown_blocks(readme, "r")))) == []
    unlisted = readme + "- Sharding by hand: not yet built.\n"
    assert [f.where for f in unregistered_claims(list(markdown_blocks(unlisted, "r")))] == ["r:5", "r:8"]
    noted = "## Partial resync\n\n(Not yet built: landing with issue 23.)\n\nIt copies less.\n"
    assert list(unregistered_claims(list(markdown_blocks(noted, "n")))) == []
    states = "A certificate not yet valid; Generation 3 not yet observed; a pod not yet Ready.\n"
    assert list(unregistered_claims(list(markdown_blocks(states, "s")))) == []


def test_pip_install_only_from_a_checkout() -> None:
    findings = [finding for path in user_pages() for finding in uninstallable(path)]
    assert not findings, "no package index serves valkey-operator: install from a path\n" + "\n".join(
        findings
    )


def test_the_pip_rule_reads_commands_as_a_shell_does() -> None:
    text = (
        "```sh\npip install valkey-operator\npip install -q -e '.[dev]' && python -m pytest\n```\n"
        "(`pip install '/path/to/checkout[testing]'`: pytest) and `pip install 'valkey-operator[testing]'`"
    )
    assert list(pip_targets(text)) == [
        "valkey-operator",
        ".[dev]",
        "/path/to/checkout[testing]",
        "valkey-operator[testing]",
    ]
    assert [bool(_LOCAL.match(word)) for word in pip_targets(text)] == [False, True, True, False]
    assert [_normalized(word) for word in pip_targets(text + "\npip install py-spy")][-1] == "py-spy"
    assert project_name() == "valkey-operator"
    assert _normalized("Valkey_Operator[testing]") == _normalized(project_name())


def chart_files() -> list[Path]:
    """The chart's own text files: values, schema, templates, alert rules."""
    return sorted(
        p
        for p in (ROOT / "charts").rglob("*")
        if p.is_file() and p.suffix in {".yaml", ".json", ".tpl", ".txt", ".md"}
    )


def test_links_resolve_in_this_repository_and_name_no_made_up_home() -> None:
    findings = [
        finding for path in sorted({*user_pages(), *chart_files()}) for finding in link_findings(path)
    ]
    assert not findings, "\n".join(findings)


def test_every_runbook_url_is_a_repository_path_that_exists() -> None:
    """The chart puts prometheusRule.runbookBaseURL before these; by themselves they must be true."""
    urls = [
        (path, url) for path in chart_files() for url in re.findall(r"runbook_url:\s*(\S+)", path.read_text())
    ]
    assert len(urls) >= 9
    for path, url in urls:
        assert not re.match(r"[a-z]+:", url), (path, url)
        file, _, anchor = url.partition("#")
        assert (ROOT / file).is_file() and anchor in page_anchors(ROOT / file), (path, url)


def test_the_link_rules_catch_a_made_up_home_and_a_missing_anchor() -> None:
    made_up = "runbook_url: https://github.com/gomomento/valkey-operator/blob/main/docs/troubleshooting.md#x"
    assert OWN_HOME.findall(made_up)
    assert not OWN_HOME.findall("the official [operator](https://github.com/valkey-io/valkey-operator)")
    page = ROOT / "docs" / "backups.md"
    assert broken_link(page, "performance.md#backups-and-restores") == (
        "performance.md#backups-and-restores: no such anchor"
    )
    assert broken_link(page, "performance.md#backups-and-restores-benchbackuppy") is None
    assert broken_link(page, "nowhere.md") == "nowhere.md: no such file"
    notes = ROOT / "charts" / "valkey-operator" / "templates" / "NOTES.txt"
    assert '"A first cluster"' in notes.read_text() and not link_findings(notes)
    assert _NAMED_SECTION.findall('see docs/install.md, "A last cluster"') == [
        ("docs/install.md", "A last cluster")
    ]


def test_a_page_sent_to_for_a_kind_shows_how_to_create_it() -> None:
    findings = [f for path in [*markdown_pages(), *notes_pages()] for f in sent_for(path, page_text(path))]
    assert not findings, "\n".join(findings)


def test_the_sent_for_rule_catches_a_page_with_nothing_on_the_kind() -> None:
    """The NOTES before issue 36 sent readers to install.md, which then had no manifest of either."""
    notes = ROOT / "charts" / "valkey-operator" / "templates" / "NOTES.txt"
    before = "   See docs/monitoring.md and docs/reference/ for ValkeyConfig, ValkeyRole and ValkeyCluster.\n"
    findings = sent_for(notes, before)
    assert [f.split(" for ")[1].split(":")[0] for f in findings] == [
        "ValkeyCluster",
        "ValkeyConfig",
        "ValkeyRole",
    ]
    assert (
        sent_for(notes, "See docs/install.md and docs/reference/ for ValkeyConfig and ValkeyCluster.\n") == []
    )


# ---- the first cluster ---------------------------------------------------------------------------
def examples() -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, name) -> object, of docs/examples/curated.yaml and cluster.yaml."""
    objects: dict[tuple[str, str], dict[str, Any]] = {}
    for name in ("curated.yaml", "cluster.yaml"):
        for doc in yaml.safe_load_all((ROOT / "docs" / "examples" / name).read_text()):
            if doc:
                objects[(doc["kind"], doc["metadata"]["name"])] = doc
    return objects


def first_cluster_commands(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if re.match(r"\s*kubectl\b", line)]


@pytest.mark.parametrize("page", ["docs/install.md", "charts/valkey-operator/templates/NOTES.txt"])
def test_the_first_cluster_path_is_true_of_the_examples(page: str) -> None:
    """Curated objects, then the cluster, then valkey-cli with the generated Secret's uri: each name
    the commands use is an object of the examples, the Secret one the operator generates."""
    commands = first_cluster_commands(page_text(ROOT / page))
    applied = [c.split()[-1] for c in commands if re.match(r"kubectl apply -f docs/examples/", c)]
    assert applied[:2] == ["docs/examples/curated.yaml", "docs/examples/cluster.yaml"], commands
    objects = examples()
    kinds = {kind.lower(): kind for kind, _ in objects}
    for command in commands:
        for resource, name in re.findall(r"\b(valkey\w+)/([\w.-]+)", command):
            assert (kinds[resource], name) in objects, command
        if re.search(r"\bvalkeycluster[/ ]", command):
            (cluster,) = [o for (k, _), o in objects.items() if k == "ValkeyCluster"]
            assert f"-n {cluster['metadata']['namespace']} " in command, command
    (connect,) = [c for c in commands if "valkey-cli" in c]
    words = shlex.split(connect)
    (override,) = [word for word in words if word.startswith("--overrides=")]
    overrides = json.loads(override.removeprefix("--overrides="))
    (container,) = overrides["spec"]["containers"]
    (image,) = [o for (k, _), o in objects.items() if k == "ValkeyImage"]
    assert container["image"] == f"{image['spec']['repository']}:{image['spec']['tag']}"
    assert f"--image={container['image']}" in words
    (cluster,) = [o for (k, _), o in objects.items() if k == "ValkeyCluster"]
    generated = [
        user_secret_name(cluster["metadata"]["name"], user["username"])
        for user in cluster["spec"]["acl"]
        if not user.get("passwordHashes") and not user.get("passwordSecretName")
    ]
    (source,) = container["envFrom"]
    assert source["secretRef"]["name"] in generated
    assert f"$({URI_KEY})" in container["command"] and container["command"][0] == "valkey-cli"
