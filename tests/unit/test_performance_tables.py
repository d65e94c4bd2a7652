"""The current tables of docs/performance.md are computed from their bench records.

Each held table is the paragraph right after a line naming its record (the file, the date
measured, the cores, the load average; "not recorded" for what the record lacks), and its rows
are the record's numbers computed as the bench computes them: the bench's own function where it
has one (peers.table, backup.summarize), its median / min / max / ratio otherwise. A row written
otherwise fails with its label, what the doc says and what the record gives. Historical tables
(before and after a change) stay prose that cites its record.
"""

from __future__ import annotations

import importlib.util
import json
import re
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "performance.md"
RESULTS = ROOT / "bench" / "results"

Record = dict[str, Any]


def bench(name: str) -> ModuleType:
    """bench/<name>.py as module `bench_<name>` (bench/ on sys.path: its scripts import siblings)."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def fold(text: str) -> str:
    return " ".join(text.split())


def load(name: str) -> Record:
    record: Record = json.loads((RESULTS / name).read_text())
    return record


def record_line(name: str, record: Mapping[str, Any], then: str) -> str:
    """The line before a held table: the record's file, when, on how many cores, at what load."""
    if "measured" in record:
        when = f"measured {record['measured']}"
    else:
        dated = re.search(r"\d{4}-\d\d-\d\d", name)
        when = "date not recorded" + (f" ({dated[0]} in the file's name)" if dated else "")
    cores = f"{record['cpus']} cores" if "cpus" in record else "cores not recorded"
    if "load_average" in record:
        averages = ", ".join(f"{value:.2f}" for value in record["load_average"])
        load_average = f"load average {averages} (1, 5, 15 min) at the end"
    else:
        load_average = "load average not recorded"
    return f"Record `bench/results/{name}`: {when}, {cores}, {load_average}; {then}:"


def label(row: str) -> str:
    cells = row.strip("|").split("|")
    return cells[0].strip() or ("header" if "---" not in row else "separator")


def section(page: str, heading: str) -> str:
    """From the `## heading` line to the next `## ` heading."""
    start = page.index(f"\n{heading}\n")
    end = page.find("\n## ", start + 1)
    return page[start : end if end >= 0 else len(page)]


def table_problems(page: str, heading: str, line: str, rows: Sequence[str]) -> list[str]:
    """What differs between the table after `line` in the section and the rows the record gives."""
    paragraphs = re.split(r"\n[ \t]*\n", section(page, heading))
    found = [index for index, paragraph in enumerate(paragraphs) if fold(paragraph).endswith(line)]
    problems = []
    if not found:
        start = line.partition(":")[0] + ":"
        found = [index for index, paragraph in enumerate(paragraphs) if fold(paragraph).startswith(start)]
        written_line = fold(paragraphs[found[0]]) if found else None
        problems.append(
            f"{heading}: the line before the table is {written_line!r}, the record gives {line!r}"
        )
        if not found:
            return problems
    written = [fold(row) for row in paragraphs[found[0] + 1].strip().splitlines()]
    by_label = {label(row): row for row in written}
    problems += [
        f"{heading}: row {label(row)!r}: the doc has {by_label.get(label(row))!r}, the record gives {row!r}"
        for row in rows
        if row not in written
    ]
    expected = {label(row) for row in rows}
    problems += [
        f"{heading}: row {label(row)!r} is not in the record: {row!r}"
        for row in written
        if label(row) not in expected
    ]
    return problems


def held(heading: str, line: str, rows: Sequence[str]) -> None:
    problems = table_problems(PAGE.read_text(), heading, line, rows)
    assert not problems, "docs/performance.md: write these as the bench record says:\n" + "\n".join(problems)


PEERS = "## Side by side with the official operator (`bench/peers.py`)"
BOOTSTRAP = "## Bootstrap (`bench/bootstrap.py`)"
PRIMARY_LOST = "## A primary's pod deleted (`bench/primary_lost.py`)"
BACKUP = "## Backups and restores (`bench/backup.py`)"


def peers_table() -> tuple[str, list[str]]:
    """bench/peers.py's own table of the medians of bench/results/peers.json, computed as it does."""
    record = load("peers.json")
    summary: dict[str, Record] = {}
    for side, rounds in record["results"].items():
        done = [result for result in rounds if "error" not in result]
        assert len(done) == record["args"]["rounds"], f"{side} did not finish every round"
        summary[side] = {key: statistics.median(result[key] for result in done) for key in done[0]}
        summary[side]["rounds"] = len(done)
    assert summary == record["summary"], "the record's summary is not the medians of its rounds"
    table: str = bench("peers").table(summary, record["args"]["sides"])
    rounds = record["args"]["rounds"]
    return record_line("peers.json", record, f"medians of {rounds} rounds"), table.splitlines()


def test_side_by_side_table_is_the_peers_record() -> None:
    line, rows = peers_table()
    held(PEERS, line, rows)
    peer = load("peers.json")["peer"]
    assert f"valkey-io/valkey-operator) at {peer}" in fold(section(PAGE.read_text(), PEERS)), peer


BOOTSTRAP_HEADER = [
    "| run | ours, median (min-max) | floor, median | ours / floor |",
    "|---|---|---|---|",
]


def bootstrap_row(run: str, seconds: Mapping[str, list[float]]) -> str:
    """A run's medians as bench/bootstrap.py prints them: median (min-max), and over the floor's."""
    ours, floor = seconds["ours"], seconds["floor"]
    assert len(ours) == len(floor)
    p50, floor_p50 = statistics.median(ours), statistics.median(floor)
    return (
        f"| {run} ({len(ours)} rounds) | {p50:.2f} s ({min(ours):.2f}-{max(ours):.2f}) "
        f"| {floor_p50:.2f} s | {p50 / floor_p50:.2f}x |"
    )


def test_bootstrap_tables_are_their_records() -> None:
    for name, run in (
        ("bootstrap-2026-12-05.json", "1"),
        ("bootstrap-joint-2026-12-05.json", "the joint choice"),
    ):
        record = load(name)
        assert record["before"] is None, "a run with --before has a third column"
        rounds = len(record["seconds"]["ours"])
        line = record_line(name, record, f"{rounds} rounds")
        held(BOOTSTRAP, line, [*BOOTSTRAP_HEADER, bootstrap_row(run, record["seconds"])])


def primary_lost_rows(record: Mapping[str, Any]) -> list[str]:
    """Each round and the medians, as bench/primary_lost.py prints them (ours first in odd rounds)."""
    ours, floor = record["seconds"]["ours"], record["seconds"]["floor"]
    rows = ["| round | ours | floor | ours - floor |", "|---|---|---|---|"]
    for index, (mine, theirs) in enumerate(zip(ours, floor, strict=True)):
        first = "ours" if index % 2 == 0 else "floor"
        rows.append(
            f"| {index + 1} ({first} first) | {mine:.2f} s | {theirs:.2f} s | {mine - theirs:+.2f} s |"
        )
    p50, floor_p50 = statistics.median(ours), statistics.median(floor)
    rows.append(f"| median | {p50:.2f} s | {floor_p50:.2f} s | {p50 - floor_p50:+.2f} s |")
    return rows


def test_primary_lost_table_is_its_record() -> None:
    record = load("primary-lost.json")
    assert record["rounds"] == len(record["seconds"]["ours"])
    line = record_line("primary-lost.json", record, f"{record['rounds']} rounds, {record['image']}")
    held(PRIMARY_LOST, line, primary_lost_rows(record))


def backup_rows(record: Mapping[str, Any]) -> list[str]:
    """bench/backup.py's medians (its summarize over the record's rounds) with each round's seconds."""
    summary = bench("backup").summarize(record["rounds"])
    assert summary == record["summary"], "the record's summary is not bench/backup.py's of its rounds"
    rounds = record["rounds"]

    def each(part: str, key: str) -> str:
        return ", ".join(f"{round_[part][key]:.1f}" for round_ in rounds)

    backup, restore = summary["backup_mb_s"], summary["restore_mb_s"]
    return [
        "| | ours | floor | ours / floor |",
        "|---|---|---|---|",
        f"| backup | {backup['wall']:.1f} MB/s wall ({each('backup', 'wall_s')} s) "
        f"| {backup['floor']:.1f} MB/s (delay-free) "
        f"| {summary['backup_ratio']['wall']:.2f} (wall), {summary['backup_ratio']['status']:.2f} (status) |",
        f"| restore, create to Verified | {restore['verified']:.1f} MB/s ({each('restore', 'verified_s')} s) "
        f"| {restore['floor_loaded']:.1f} MB/s: download and load ({each('restore_floor', 'loaded_s')} s) "
        f"| {summary['restore_ratio']['verified']:.2f} |",
        f"| restore, create to Verified | {restore['verified']:.1f} MB/s "
        f"| {restore['floor_formed']:.1f} MB/s: download, load and a cluster ok "
        f"({each('restore_floor', 'formed_s')} s) | {summary['restore_ratio_formed']['verified']:.2f} |",
    ]


def test_newest_backup_table_is_its_record() -> None:
    record = load("backup-2026-12-05.json")
    then = (
        f"operator {record['operator']}, {record['image']}, medians of {len(record['rounds'])} rounds, "
        f"{record['summary']['backup_mb']:.0f} MB"
    )
    held(BACKUP, record_line("backup-2026-12-05.json", record, then), backup_rows(record))


def test_a_changed_number_fails_naming_its_row() -> None:
    line, rows = peers_table()
    page = PAGE.read_text()
    right = rows[3]
    wrong = re.sub(r"\d(?=\D*$)", lambda digit: str((int(digit[0]) + 1) % 10), right)
    problems = table_problems(page.replace(right, wrong), PEERS, line, rows)
    assert problems == [
        f"{PEERS}: row {label(right)!r}: the doc has {wrong!r}, the record gives {right!r}"
    ], problems
    measured = load("peers.json")["measured"]
    problems = table_problems(page.replace(f"measured {measured}", "measured 1999-01-01"), PEERS, line, rows)
    assert (
        len(problems) == 1
        and "the line before the table is 'Record `bench/results/peers.json`: measured 1999-01-01"
        in problems[0]
    ), problems


def test_what_a_record_lacks_is_said_not_recorded() -> None:
    assert record_line("x.json", {}, "3 rounds") == (
        "Record `bench/results/x.json`: date not recorded, cores not recorded, "
        "load average not recorded; 3 rounds:"
    )
    record = {"measured": "2026-12-05", "cpus": 2, "load_average": [1.5, 0.25, 2]}
    assert record_line("y-2026-12-04.json", record, "1 round") == (
        "Record `bench/results/y-2026-12-04.json`: measured 2026-12-05, 2 cores, "
        "load average 1.50, 0.25, 2.00 (1, 5, 15 min) at the end; 1 round:"
    )
