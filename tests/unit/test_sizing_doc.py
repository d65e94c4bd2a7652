"""docs/sizing.md quotes bench/sizing.py's saved output and nothing else: the verbatim block equals
bench/results/sizing.txt, and every table row and percentage the page cites is read from it.
After a new run (`nice python bench/sizing.py --cow-megabytes 1024 > bench/results/sizing.txt`),
rewrite the rows these tests print."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "sizing.md"
RESULTS = ROOT / "bench" / "results" / "sizing.txt"

PER_KEY = re.compile(r"^per-key value\s+(\d+) B .*?(\d+\.\d) B/key\s+overhead\s+(\d+\.\d) B/key", re.M)
COW = re.compile(
    r"^cow (idle|writes)\s+dataset\s+[\d.]+ MiB\s+BGSAVE\s+([\d.]+) s\s+copy-on-write\s+([\d.]+) MiB"
    r" \(\s*([\d.]+%) of used_memory\)(?:\s+writer\s+(\d+) SET/s \((flat out|paced at \d+))?",
    re.M,
)


def measured_block(page: str) -> str:
    section = page.split("## The measurements", 1)[1]
    match = re.search(r"```text\n(.*?)```", section, re.S)
    assert match, "no ```text block under ## The measurements"
    return match.group(1)


def expected_rows() -> list[str]:
    results = RESULTS.read_text()
    rows = [f"| {size} B | {each} B | {overhead} B |" for size, each, overhead in PER_KEY.findall(results)]
    for kind, took, cow, share, rate, how in COW.findall(results):
        writes = "none" if kind == "idle" else f"{rate} SET/s"
        if how == "flat out":
            writes += " (one connection, flat out)"
        rows.append(f"| {writes} | {took} s | {cow} MiB | {share} |")
    return rows


def test_the_page_shows_the_saved_output_verbatim() -> None:
    assert measured_block(DOC.read_text()) == RESULTS.read_text()


def test_every_table_row_is_the_saved_output() -> None:
    rows = expected_rows()
    assert len(rows) == 8, rows  # four value sizes, idle and three write rates
    page = DOC.read_text()
    missing = [row for row in rows if row not in page]
    assert not missing, "docs/sizing.md should have these rows:\n" + "\n".join(missing)


def test_the_percentages_and_ratios_in_the_prose_are_measured() -> None:
    prose = DOC.read_text().split("## The measurements", 1)[0]
    results = RESULTS.read_text()
    for share in re.findall(r"\(the (\d+\.\d%) above\)", prose):
        assert f"{share} of used_memory" in results.replace("( ", "("), share
    for each in re.findall(r"about (\d+\.\d) / 1000", prose):
        assert f"{each} B/key" in results, each
    assert re.findall(r"\(the (\d+\.\d%) above\)", prose), "the prose cites no measured share"
