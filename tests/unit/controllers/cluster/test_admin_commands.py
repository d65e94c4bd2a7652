"""ADMIN_COMMANDS is exactly what the operator's code sends to the nodes (a scan of the source).

Every module outside the test bed that imports the admin client or the RDB stream is read as
Python source, and every command it can send is collected: the first string of a tuple or list
literal that is an upper-case word (a pipeline batch, PROBE_INFO), and the first string argument
of `.command(`, `.text(` and rdb_stream's `_ask(`. A container command (CLUSTER, CONFIG, ACL,
...) counts with its subcommand, which must then be a literal too. A command the code starts
sending without its ACL rule fails here, long before a node answers NOPERM; a rule no code needs
any more fails too. tests/integration/valkey/test_admin_acl_server.py runs the paths on real nodes.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from controllers.cluster.render.acl import ADMIN_COMMANDS

ROOT = Path(__file__).resolve().parents[4]
CLIENT_MODULES = ("valkey_operator.valkey.admin", "valkey_operator.valkey.rdb_stream")
CONTAINERS = frozenset(
    {"ACL", "CLIENT", "CLUSTER", "COMMAND", "CONFIG", "FUNCTION", "LATENCY", "MEMORY", "MODULE",
     "OBJECT", "PUBSUB", "SCRIPT", "SLOWLOG", "XGROUP", "XINFO"}
)  # fmt: skip
"""Valkey commands whose ACL rules name a subcommand (`+cluster|meet`)."""
NOT_COMMANDS = {
    ("valkey_operator/valkey/admin.py", "SLOTSRANGE"): "the argument list of CLUSTER MIGRATESLOTS",
    ("controllers/backup/reconciler.py", "B"): "human_size's units",
}
"""Upper-case first words of literals that are not commands, each where it is allowed."""
SENDERS = frozenset({"command", "text", "_ask"})
_WORD = re.compile(r"[A-Z][A-Z_-]*")


def node_modules() -> list[Path]:
    """The client modules and every module that imports them, the test bed excluded."""
    found = []
    for package in ("controllers", "valkey_operator"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "testing" in path.relative_to(ROOT).parts:
                continue
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if module in CLIENT_MODULES or any(name in path.read_text() for name in CLIENT_MODULES):
                found.append(path)
    return found


def _strings(nodes: list[ast.expr]) -> list[ast.expr]:
    return [node for node in nodes if not isinstance(node, ast.Starred)]


def _command(parts: list[ast.expr], where: str) -> str | None:
    first = parts[0] if parts else None
    if not (
        isinstance(first, ast.Constant) and isinstance(first.value, str) and _WORD.fullmatch(first.value)
    ):
        return None
    name = first.value
    if name not in CONTAINERS:
        return name.lower()
    sub = parts[1] if len(parts) > 1 else None
    assert isinstance(sub, ast.Constant) and isinstance(sub.value, str), (
        f"{where}: {name} without a literal subcommand"
    )
    return f"{name.lower()}|{sub.value.lower()}"


def sent_commands(source: str, label: str) -> Iterator[tuple[str, str]]:
    """(command, where) for every command a module's source can send; label is its path."""
    tree = ast.parse(source, label)
    for node in ast.walk(tree):
        where = f"{label}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Tuple | ast.List):
            name = _command(_strings(node.elts), where)
        elif isinstance(node, ast.Call):
            func = node.func
            called = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if called not in SENDERS:
                continue
            literal = [
                arg for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            ]
            start = node.args.index(literal[0]) if literal else len(node.args)
            name = _command(_strings(node.args[start:]), where)
        else:
            continue
        if name is not None and (label, name.upper()) not in NOT_COMMANDS:
            yield name, where


def test_the_scan_sees_the_known_senders() -> None:
    """The scan finds the client, the observer, the operator's series, the actor and the backup."""
    scanned = {str(path.relative_to(ROOT)) for path in node_modules()}
    for expected in (
        "valkey_operator/valkey/admin.py",
        "valkey_operator/valkey/rdb_stream.py",
        "controllers/shared/probe.py",
        "controllers/cluster/valkey_exporter.py",
        "controllers/cluster/actor.py",
        "controllers/backup/reconciler.py",
    ):
        assert expected in scanned


def test_admin_commands_are_exactly_what_the_code_sends() -> None:
    sent: dict[str, list[str]] = {}
    for path in node_modules():
        for name, where in sent_commands(path.read_text(), str(path.relative_to(ROOT))):
            sent.setdefault(name, []).append(where)
    listed = {rule.removeprefix("+") for rule in ADMIN_COMMANDS}
    assert all(rule.startswith("+") for rule in ADMIN_COMMANDS)
    missing = {name: places for name, places in sent.items() if name not in listed}
    assert missing == {}, f"sent without a rule in ADMIN_COMMANDS: {missing}"
    assert listed - set(sent) == set(), "rules in ADMIN_COMMANDS that no code sends"
    assert len(ADMIN_COMMANDS) == len(listed)


def test_the_scan_catches_a_new_command() -> None:
    """Break-it for the scan itself: a pipeline entry and a .command( call are both found."""
    source = (
        "async def f(n):\n"
        '    await n.pipeline(("MEMORY", "STATS"), ("DBSIZE",))\n'
        '    await n.command("FLUSHALL")\n'
    )
    assert {name for name, _ in sent_commands(source, "new.py")} == {"memory|stats", "dbsize", "flushall"}
