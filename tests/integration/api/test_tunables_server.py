"""The tunables table against real valkey-server 9.0 and 9.1: defaults, CONFIG SET, canonical values.

Every claim of valkey_operator/api/tunables.py is checked on a real server of
each release, started the way the operator's nodes run (cluster mode, no
tunable set): the defaults it prints, which directives CONFIG SET accepts,
that what CONFIG GET prints after a CONFIG SET is exactly `canonical()`
(for sample values and for edge spellings alike), that several directives go
in one CONFIG SET, and that a valkey.conf written from a config starts a node
on `desired_runtime()`.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs
import pytest
from tunable_samples import SAMPLES

from controllers.cluster.render.config import quote
from valkey_operator.api import tunables
from valkey_operator.api.tunable_values import Boolean, Enum, Integer, KeyspaceEvents, Memory, Percentiles
from valkey_testbed.datachecker import ReplyError
from valkey_testbed.images import ImageEntry, install_images, resolve_image
from valkey_testbed.valkeyproc import (
    ValkeyServer,
    free_cluster_port,
    server_base_dir,
    start_server,
)

pytestmark = pytest.mark.timeout(300)

HOST = "127.0.91.1"
RELEASES = {
    "valkey/valkey:9.0.0": (9, 0, 0),
    "valkey/valkey:9.1.0": (9, 1, 0),
    "valkey/valkey:9.1.2": (9, 1, 2),
}
# How the operator's nodes run (render/config.py), minus what does not touch tunables.
CLUSTER_MODE = {"cluster-enabled": "yes", "cluster-config-file": "nodes.conf"}
DEFRAG_REFUSED = "Active defragmentation cannot be enabled"
TOO_MANY_CLIENTS = "The operating system is not able to handle the specified number of clients"
RESERVED_FDS = 32  # Valkey keeps this many descriptors beside maxclients

# One or two non-default values per runtime directive, as a user would write them.

# Spellings at the edges of each value type; the server must agree with canonical() on every one.
EDGE_SPELLINGS: dict[type, tuple[str, ...]] = {
    Integer: ("007", "+1", "-0", "1.5", "", " 1", "1e3", "9223372036854775808"),
    Memory: (
        "2K",
        "3kb",
        "1M",
        "5MB",
        "1g",
        "1Gb",
        "1b",
        "",
        "mb",
        "007",
        "+5",
        "-1",
        "1.5gb",
        "1tb",
        " 1",
        "0x10",
    ),
    Boolean: ("YES", "No", "true", "1", "yes ", ""),
    Enum: ("NoEviction", "lru", ""),
    Percentiles: ("", "50  99", " 50", "50 ", "1e1", "-0", "+5", ".5", "100.0000001", "99.99999999", "nan"),
    KeyspaceEvents: ("An", "Am", "g$lshzxetd", "g$lshzxetdn", "Exg", "EEE", "mnKE", "KEA!", "a"),
}
# Spellings whose reading changed between 9.0 and 9.1 (tunable_values.Dialect).
DIALECT_SPELLINGS = {
    "maxmemory": ("18446744073709551615", "18446744073709551616", "17179869183gb", "17179869184gb"),
    "maxmemory-clients": ("0%", "100%", "101%", "-5%", "18446744073709551615", "9223372036854775808"),
    "latency-tracking-info-percentiles": ("0x10", "1e-310", "1e-400"),
}
# Bounds not probed: maxclients 1 would lock the test's own connections out, and above the
# open-files limit Valkey refuses at apply time (test_maxclients_above_the_file_limit...).
UNPROBED_BOUNDS = {"maxclients"}


@attrs.frozen
class Node:
    """A running server of one release."""

    reference: str
    server: ValkeyServer

    @property
    def version(self) -> tuple[int, int, int]:
        return RELEASES[self.reference]

    def get(self, *names: str) -> dict[str, str]:
        reply = self.server.command("CONFIG", "GET", *names)
        assert isinstance(reply, list), reply
        pairs = [item.decode() if isinstance(item, bytes) else str(item) for item in reply]
        return dict(zip(pairs[::2], pairs[1::2], strict=True))

    def set(self, settings: Mapping[str, str]) -> str | None:
        """One CONFIG SET of every pair; None when OK, else Valkey's error message."""
        args = [part for pair in settings.items() for part in pair]
        reply = self.server.command("CONFIG", "SET", *args)
        if isinstance(reply, ReplyError):
            return reply.message
        assert reply == b"OK", reply
        return None

    def outcome(self, name: str, value: str) -> tuple[str | None, str | None]:
        """(what CONFIG GET prints after CONFIG SET name value, or None if refused; the error)."""
        error = self.set({name: value})
        printed = None if error else self.get(name)[name]
        restored = self.set({name: tunables.BY_NAME[name].default})
        assert restored is None, (name, restored)
        return printed, error

    def allocator(self) -> str:
        return self.server.info("memory")["mem_allocator"]

    def open_files_hard_limit(self) -> int:
        limits = Path(f"/proc/{self.server.record.pid}/limits").read_text()
        line = next(line for line in limits.splitlines() if line.startswith("Max open files"))
        return int(line.split()[4])


def image(reference: str) -> ImageEntry:
    entry = resolve_image(reference)
    assert entry is not None, f"{reference} is not installed: run python -m valkey_testbed build"
    return entry


@pytest.fixture(scope="module")
def installed() -> None:
    """The catalog installed (a no-op when `python -m valkey_testbed build` ran)."""
    install_images(progress=lambda line: None)


@pytest.fixture(scope="module")
def base_dir() -> Iterator[Path]:
    base = server_base_dir()
    yield base
    shutil.rmtree(base, ignore_errors=True)


def start(reference: str, base: Path, settings: Mapping[str, str] | None = None) -> ValkeyServer:
    """A cluster-mode server of that image; settings go into its valkey.conf quoted as the operator does."""
    config = {**CLUSTER_MODE, **{name: quote(value) for name, value in (settings or {}).items()}}
    return start_server(image(reference), HOST, free_cluster_port(HOST), base_dir=base, config=config)


@pytest.fixture(scope="module", params=sorted(RELEASES))
def started(request: pytest.FixtureRequest, installed: None, base_dir: Path) -> Iterator[Node]:
    """A fresh server of each release, shared by the module's tests."""
    server = start(request.param, base_dir)
    try:
        yield Node(request.param, server)
    finally:
        server.stop()


@pytest.fixture
def node(started: Node) -> Iterator[Node]:
    """The release's server; every runtime directive set back to its default after the test."""
    yield started
    started.set(tunables.desired_runtime({}, started.version).values)


def test_sample_table_covers_every_runtime_directive() -> None:
    assert set(SAMPLES) == tunables.RUNTIME_TUNABLES
    for name, values in SAMPLES.items():
        for value in values:
            printed = tunables.canonical(name, value)
            assert printed not in (None, tunables.BY_NAME[name].default), (name, value)


@contextlib.contextmanager
def fresh(reference: str, base: Path, settings: Mapping[str, str] | None = None) -> Iterator[Node]:
    """A server of its own for one test, stopped afterwards."""
    server = start(reference, base, settings)
    try:
        yield Node(reference, server)
    finally:
        server.stop()


def test_a_fresh_node_prints_every_default(node: Node, base_dir: Path) -> None:
    with fresh(node.reference, base_dir) as new:
        printed = new.get(*sorted(tunables.TUNABLES))
        hard_limit = new.open_files_hard_limit()
    assert set(printed) == tunables.TUNABLES, "every allowlisted directive exists on this release"
    expected = {tunable.name: tunable.default for tunable in tunables.TABLE}
    if hard_limit < int(expected["maxclients"]) + RESERVED_FDS:
        # Lowered at start to what the file limit allows (tunables module docstring).
        assert int(printed["maxclients"]) < int(expected["maxclients"])
        expected["maxclients"] = printed["maxclients"]
    assert printed == expected


def test_config_set_accepts_exactly_the_runtime_directives(node: Node) -> None:
    for tunable in tunables.TABLE:
        error = node.set({tunable.name: tunable.default})
        if tunable.runtime:
            assert error is None, (tunable.name, error)
        else:
            assert error is not None, f"{tunable.name} is marked startup-only but CONFIG SET accepted it"
            assert "immutable" in error, (tunable.name, error)


def test_each_sample_prints_its_canonical_value_and_the_default_restores(node: Node) -> None:
    defrag = node.allocator().startswith("jemalloc")
    for name, values in SAMPLES.items():
        for value in values:
            printed, error = node.outcome(name, value)
            if name == "activedefrag" and not defrag:
                assert error is not None, f"activedefrag accepted on {node.allocator()}"
                assert DEFRAG_REFUSED in error
                continue
            assert error is None, (name, value, error)
            assert printed == tunables.canonical(name, value, node.version), (name, value)
            assert node.get(name)[name] == tunables.BY_NAME[name].default, f"{name} back at its default"


def probes(tunable: tunables.Tunable) -> list[str]:
    """Edge spellings of its type, and its numeric bounds with one step beyond each."""
    values = list(EDGE_SPELLINGS[type(tunable.value)])
    values += DIALECT_SPELLINGS.get(tunable.name, ())
    kind = tunable.value
    if isinstance(kind, Integer | Memory) and tunable.name not in UNPROBED_BOUNDS:
        lowest = max(kind.minimum, 0) if isinstance(kind, Memory) else kind.minimum
        if tunable.name == "maxmemory-clients":
            lowest = 0  # a byte limit of 1 would evict the test's own connections
        values += [str(lowest - 1), str(lowest), str(kind.maximum), str(kind.maximum + 1)]
    if tunable.name == "maxclients":
        values += ["0", "2", str(1 << 32)]
    if isinstance(kind, Integer) and kind.clamp:
        values += [str(kind.clamp[0] - 1), str(kind.clamp[1] + 1)]
    return values


def test_the_server_agrees_with_canonical_on_every_edge_spelling(node: Node) -> None:
    defrag = node.allocator().startswith("jemalloc")
    disagreements = []
    for tunable in tunables.TABLE:
        if not tunable.runtime:
            continue
        for value in probes(tunable):
            printed, error = node.outcome(tunable.name, value)
            expected = tunable.canonical(value, node.version)
            if tunable.name == "activedefrag" and expected == "yes" and not defrag:
                expected = None  # refused by the build, not the syntax (as in the samples test)
                assert error is not None
                assert DEFRAG_REFUSED in error
            if printed != expected:
                disagreements.append(
                    f"{tunable.name} {value!r}: server {printed!r} ({error}), table {expected!r}"
                )
    assert not disagreements, "\n".join(disagreements)


def test_several_directives_in_one_config_set(node: Node) -> None:
    settings = {name: values[0] for name, values in SAMPLES.items() if name != "activedefrag"}
    assert node.set(settings) is None
    desired = tunables.desired_runtime(settings, node.version)
    assert not desired.invalid
    assert node.get(*tunables.RUNTIME_NAMES) == desired.values
    # Back to a node without any of them: one CONFIG SET of every default.
    defaults = tunables.desired_runtime({}, node.version).values
    assert node.set(defaults) is None
    assert node.get(*tunables.RUNTIME_NAMES) == defaults


def test_one_refused_directive_fails_the_whole_config_set(node: Node) -> None:
    error = node.set({"timeout": "30", "maxmemory-policy": "lru-everything", "hz": "20"})
    assert error is not None
    assert "'maxmemory-policy'" in error, error  # Valkey names the directive it refused
    assert node.get("timeout", "hz") == {"timeout": "0", "hz": "10"}, "nothing of the call applied"


def test_maxclients_above_the_file_limit_is_refused_at_runtime_only(node: Node) -> None:
    value = str(node.open_files_hard_limit() - RESERVED_FDS + 1000)
    assert tunables.canonical("maxclients", value) == value  # the type accepts it, as does the CRD
    printed, error = node.outcome("maxclients", value)
    assert printed is None
    assert error is not None
    assert TOO_MANY_CLIENTS in error, error


def test_a_node_started_from_a_config_runs_desired_runtime(node: Node, base_dir: Path) -> None:
    settings = {name: values[-1] for name, values in SAMPLES.items() if name != "activedefrag"}
    with fresh(node.reference, base_dir, settings) as configured:
        printed = configured.get(*tunables.RUNTIME_NAMES)
    assert printed == tunables.desired_runtime(settings, node.version).values
