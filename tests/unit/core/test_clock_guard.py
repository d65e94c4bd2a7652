"""The core reads time and waits only through its injected Clock, so a FakeClock reaches every wait.

The guard reads the core's syntax trees, not its lines: a regex for `sleep\\([^0]` let
`asyncio.sleep(0.5)` through, and a line scan misses a call split over lines or a
name imported with `from asyncio import sleep`. The guard is tested on the
snippets it must catch and the ones it must let pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[3] / "valkey_operator" / "core"

FORBIDDEN = frozenset(
    {
        "time.time",
        "time.time_ns",
        "time.monotonic",
        "time.monotonic_ns",
        "time.perf_counter",
        "time.perf_counter_ns",
        "time.sleep",
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
        "asyncio.timeout",
        "asyncio.timeout_at",
        "asyncio.wait_for",
    }
)
"""Calls that read the machine's time or wait on the loop's: the clock.py module alone makes them."""
LOOP_TIMERS = frozenset({"call_at", "call_later", "time"})
"""Event-loop methods that read or schedule on the loop's own clock (`loop.time()`, `call_at`)."""


def _imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted name, for `import x as y` and `from x import y as z`."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.expr, names: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return names.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, names)
        return f"{base}.{node.attr}" if base else None
    return None


def _is_zero_sleep(call: ast.Call) -> bool:
    """`asyncio.sleep(0)`: a bare yield to the loop, which waits for no time."""
    if call.keywords or len(call.args) != 1:
        return False
    arg = call.args[0]
    return isinstance(arg, ast.Constant) and arg.value == 0 and not isinstance(arg.value, bool)


def direct_time_uses(source: str) -> list[str]:
    """`line: call` for every call in source that reads time or waits outside a Clock."""
    tree = ast.parse(source)
    return _uses(tree)


def _uses(tree: ast.Module) -> list[str]:
    names = _imports(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        dotted = _dotted(node.func, names) or ""
        forbidden = dotted in FORBIDDEN
        if dotted == "asyncio.sleep" and not _is_zero_sleep(node):
            forbidden = True
        if isinstance(node.func, ast.Attribute) and node.func.attr in LOOP_TIMERS:
            forbidden = True  # loop.time(), loop.call_at(...), whatever the loop is called
        if forbidden:
            found.append(f"{node.lineno}: {ast.unparse(node.func)}")
    return found


def test_the_core_reads_time_and_sleeps_only_through_the_clock() -> None:
    """Everything else takes a Clock, so the fake clock reaches every wait and timestamp."""
    modules = sorted(path for path in CORE.rglob("*.py") if path.name != "clock.py")
    assert len(modules) > 20, "the guard must see the core"
    found = [
        f"{path.relative_to(CORE)}:{use}" for path in modules for use in direct_time_uses(path.read_text())
    ]
    assert found == []


def test_the_guard_sees_clock_py_itself() -> None:
    """The one module allowed to read time does so: the guard would say where."""
    found = direct_time_uses((CORE / "clock.py").read_text())
    assert any("time.monotonic" in use for use in found), found
    assert any("asyncio.timeout" in use for use in found), found


CAUGHT = [
    "import asyncio\nawait asyncio.sleep(0.5)",
    "import asyncio\nawait asyncio.sleep(1)",
    "import asyncio\nawait asyncio.sleep(delay)",
    "import asyncio\nawait asyncio.sleep(0, result)",
    "import asyncio\nawait asyncio.sleep(\n    0.5\n)",
    "import asyncio as aio\nawait aio.sleep(0.25)",
    "from asyncio import sleep\nawait sleep(2)",
    "import asyncio\nasync with asyncio.timeout(3):\n    pass",
    "import asyncio\nawait asyncio.wait_for(work, 3)",
    "import time\nstarted = time.monotonic()",
    "from time import monotonic\nstarted = monotonic()",
    "import time\nstamp = time.time()",
    "import time\ntime.sleep(1)",
    "import datetime\nnow = datetime.datetime.now()",
    "from datetime import datetime\nnow = datetime.now(UTC)",
    "deadline = self._loop.time() + seconds",
    "asyncio.get_running_loop().call_at(when, fire)",
    "loop.call_later(5, fire)",
]
PASSED = [
    "import asyncio\nawait asyncio.sleep(0)",
    "await self.clock.sleep(0.5)",
    "started = self._clock.now()",
    "import datetime\nmoment = datetime.datetime.fromtimestamp(clock.wall(), datetime.UTC)",
    "import datetime\nexpires = datetime.datetime.fromisoformat(text).timestamp()",
    "timeout = aiohttp.ClientTimeout(total=5)",
    "seconds = self._next_watch_timeout()",
]


def in_coroutine(snippet: str) -> str:
    """A snippet's imports at the top, the rest in a coroutine (await is valid only there)."""
    lines = snippet.splitlines()
    imports = [line for line in lines if line.startswith(("import ", "from "))]
    body = [f"    {line}" for line in lines if line not in imports]
    return "\n".join([*imports, "async def snippet():", *body, ""])


@pytest.mark.parametrize("snippet", CAUGHT)
def test_the_guard_catches(snippet: str) -> None:
    assert direct_time_uses(in_coroutine(snippet)), snippet


@pytest.mark.parametrize("snippet", PASSED)
def test_the_guard_lets_pass(snippet: str) -> None:
    assert direct_time_uses(in_coroutine(snippet)) == [], snippet
