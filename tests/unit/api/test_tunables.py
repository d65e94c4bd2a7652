"""canonical() reads values as Valkey does, desired_runtime() fills every directive, the page matches.

The expected strings are what real 9.0 and 9.1 servers printed (the same
cases run against them in tests/integration/api/test_tunables_server.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from valkey_operator.api import tunables
from valkey_operator.api.tunable_values import LEGACY, NEWEST, dialect_for
from valkey_operator.valkey.rdb_stream import SYNC_DELAY

PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference" / "valkeyconfig.md"
V90, V91 = (9, 0, 1), (9, 1, 2)

CASES = [
    # bytes: units k=1000, kb=1024 (any case), printed in bytes; no sign, fraction or space
    ("maxmemory", "100mb", "104857600"),
    ("maxmemory", "1GB", "1073741824"),
    ("maxmemory", "1g", "1000000000"),
    ("maxmemory", "1K", "1000"),
    ("maxmemory", "1kb", "1024"),
    ("maxmemory", "1B", "1"),
    ("maxmemory", "007", "7"),
    ("maxmemory", "", "0"),
    ("maxmemory", "mb", "0"),
    ("maxmemory", "17179869184gb", "0"),  # the unit multiplication wraps, unchecked
    ("maxmemory", "18446744073709551615", "18446744073709551615"),
    ("maxmemory", "1.5gb", None),
    ("maxmemory", "1tb", None),
    ("maxmemory", "1 mb", None),
    ("maxmemory", " 1", None),
    ("maxmemory", "+5", None),
    ("maxmemory", "-1", None),
    ("hash-max-listpack-value", "1kb", "1024"),
    ("set-max-listpack-value", "1kb", None),  # a plain integer, unlike its hash and zset siblings
    ("active-defrag-ignore-bytes", "0", None),
    ("active-defrag-ignore-bytes", "9223372036854775808", None),
    # bytes or percent of maxmemory
    ("maxmemory-clients", "25%", "25%"),
    ("maxmemory-clients", "100%", "100%"),
    ("maxmemory-clients", "0%", "0"),
    ("maxmemory-clients", "64MB", "67108864"),
    ("maxmemory-clients", "101%", None),
    ("maxmemory-clients", "-5%", None),
    ("maxmemory-clients", "050%", None),
    ("maxmemory-clients", "5.5%", None),
    ("maxmemory-clients", "9223372036854775808", None),
    ("maxmemory-clients", "18446744073709551615", "1%"),  # wraps to -1, read as a percentage
    # integers: string2ll, no leading zeros or plus sign
    ("maxmemory-samples", "64", "64"),
    ("maxmemory-samples", "65", None),
    ("maxmemory-samples", "010", None),
    ("maxmemory-samples", "-0", None),
    ("maxmemory-samples", "+1", None),
    ("timeout", "2147483648", None),
    ("slowlog-log-slower-than", "-1", "-1"),
    ("slowlog-log-slower-than", "-2", None),
    ("slowlog-max-len", "-1", None),  # unsigned
    ("slowlog-max-len", "9223372036854775807", "9223372036854775807"),
    ("list-max-listpack-size", "-2147483648", "-2147483648"),
    ("list-max-listpack-size", "-2147483649", None),
    ("hz", "0", "1"),
    ("hz", "1000", "500"),
    ("hz", "-1", None),
    ("io-threads", "256", "256"),
    ("io-threads", "257", None),
    ("maxclients", "0", None),
    ("maxclients", "4294967296", None),
    # booleans and enums: any case, printed lowercase
    ("activerehashing", "YES", "yes"),
    ("activerehashing", "No", "no"),
    ("activerehashing", "true", None),
    ("activerehashing", "yes ", None),
    ("maxmemory-policy", "ALLKEYS-LRU", "allkeys-lru"),
    ("maxmemory-policy", "Volatile-TTL", "volatile-ttl"),
    ("maxmemory-policy", "lru", None),
    # percentiles: single spaces, printed as %f trimmed
    ("latency-tracking-info-percentiles", "50 99.0 99.9", "50 99 99.9"),
    ("latency-tracking-info-percentiles", "", ""),
    ("latency-tracking-info-percentiles", "1e1", "10"),
    ("latency-tracking-info-percentiles", "-0", "-0"),
    ("latency-tracking-info-percentiles", ".5", "0.5"),
    ("latency-tracking-info-percentiles", "+5", "5"),
    ("latency-tracking-info-percentiles", "99.99999999", "100"),
    ("latency-tracking-info-percentiles", "50.1234567", "50.123457"),
    ("latency-tracking-info-percentiles", "1e-310", "0"),
    ("latency-tracking-info-percentiles", "2.4e-324", None),
    ("latency-tracking-info-percentiles", "100.0000001", None),
    ("latency-tracking-info-percentiles", "50  99", None),
    ("latency-tracking-info-percentiles", "50 ", None),
    ("latency-tracking-info-percentiles", "nan", None),
    ("latency-tracking-info-percentiles", "inf", None),
    # keyspace events: case-sensitive classes, printed in Valkey's order
    ("notify-keyspace-events", "KEA", "AKE"),
    ("notify-keyspace-events", "Ex", "xE"),
    ("notify-keyspace-events", "Exg", "gxE"),
    ("notify-keyspace-events", "g$lshzxetd", "A"),
    ("notify-keyspace-events", "An", "A"),  # Valkey drops 'n' when printing 'A'
    ("notify-keyspace-events", "mnKE", "nKEm"),
    ("notify-keyspace-events", "EEE", "E"),
    ("notify-keyspace-events", "", ""),
    ("notify-keyspace-events", "a", None),
    ("notify-keyspace-events", "KEA!", None),
]


@pytest.mark.parametrize(("directive", "value", "printed"), CASES)
def test_canonical_prints_what_valkey_prints(directive: str, value: str, printed: str | None) -> None:
    assert tunables.canonical(directive, value) == printed
    assert tunables.canonical(directive, value, V90) == printed


@pytest.mark.parametrize(
    ("directive", "value", "on_90", "on_91"),
    [
        ("maxmemory", "18446744073709551616", "18446744073709551615", None),  # 9.0 saturates
        ("maxmemory", "99999999999999999999999gb", "18446744072635809792", None),
        ("latency-tracking-info-percentiles", "0x10", "16", None),  # 9.0 takes strtod's hex
        ("latency-tracking-info-percentiles", "0x1p-1", "0.5", None),
        ("latency-tracking-info-percentiles", "0X.8", "0.5", None),
    ],
)
def test_a_few_spellings_read_differently_on_90(directive: str, value: str, on_90: str, on_91: None) -> None:
    assert tunables.canonical(directive, value, V90) == on_90
    assert tunables.canonical(directive, value, V91) == on_91
    assert tunables.canonical(directive, value) == on_91  # no version: the newest


def test_dialect_follows_the_minor_release() -> None:
    assert dialect_for((9, 0, 0)) is LEGACY
    assert dialect_for((9, 1, 0)) is NEWEST
    assert dialect_for((10, 0)) is NEWEST
    assert dialect_for(None) is NEWEST


def test_directive_names_are_case_insensitive_and_unknown_ones_raise() -> None:
    assert tunables.canonical("MaxMemory-Policy", "allkeys-LFU") == "allkeys-lfu"
    with pytest.raises(KeyError):
        tunables.canonical("requirepass", "x")


@pytest.mark.parametrize("tunable", tunables.TABLE, ids=lambda tunable: tunable.name)
def test_every_default_is_its_own_canonical_form(tunable: tunables.Tunable) -> None:
    assert tunable.canonical(tunable.default) == tunable.default
    assert tunable.canonical(tunable.default, V90) == tunable.default


@given(
    st.sampled_from(tunables.TABLE),
    st.text(alphabet="0123456789 .-+%eEkKmMgGbBxyYesnNoOAKEglhz$", max_size=24),
    st.sampled_from([V90, V91]),
)
def test_canonical_values_are_fixed_points(
    tunable: tunables.Tunable, value: str, version: tuple[int, ...]
) -> None:
    printed = tunable.canonical(value, version)
    if printed is not None:
        assert tunable.canonical(printed, version) == printed


def test_the_table_names_each_directive_once_and_the_sets_derive_from_it() -> None:
    names = [tunable.name for tunable in tunables.TABLE]
    assert len(names) == len(set(names))
    assert all(name == name.lower() for name in names)
    assert set(names) == tunables.TUNABLES
    assert {t.name for t in tunables.TABLE if t.runtime} == tunables.RUNTIME_TUNABLES
    assert {t.name for t in tunables.TABLE if not t.runtime} == tunables.STARTUP_TUNABLES
    assert list(tunables.RUNTIME_NAMES) == sorted(tunables.RUNTIME_TUNABLES)
    assert tunables.is_tunable("MaxMemory")
    assert not tunables.is_tunable("dynamic-hz")  # a no-op in 9.x: unknown to CONFIG GET and SET


def test_desired_runtime_fills_every_runtime_directive_with_its_default() -> None:
    desired = tunables.desired_runtime({}, V91)
    assert desired.values == {name: tunables.BY_NAME[name].default for name in tunables.RUNTIME_NAMES}
    assert list(desired.values) == list(tunables.RUNTIME_NAMES)
    assert desired.invalid == {}


def test_desired_runtime_canonicalises_given_values_and_sets_refused_ones_apart() -> None:
    settings = {
        "MaxMemory": "100mb",
        "maxmemory-policy": "ALLKEYS-LRU",
        "notify-keyspace-events": "KEA",
        "hz": "lots",
        "not-a-directive": "1",
    }
    desired = tunables.desired_runtime(settings, V91)
    assert desired.values["maxmemory"] == "104857600"
    assert desired.values["maxmemory-policy"] == "allkeys-lru"
    assert desired.values["notify-keyspace-events"] == "AKE"
    assert desired.values["timeout"] == "0"  # not given: the default
    assert "hz" not in desired.values
    assert desired.invalid == {"hz": "lots"}
    assert "not-a-directive" not in desired.values
    assert set(desired.values) | set(desired.invalid) == tunables.RUNTIME_TUNABLES


def test_desired_runtime_reads_values_as_the_nodes_release_does() -> None:
    settings = {"maxmemory": "18446744073709551616"}
    assert tunables.desired_runtime(settings, V90).values["maxmemory"] == "18446744073709551615"
    assert tunables.desired_runtime(settings, V91).invalid == settings


# --- the reference page -------------------------------------------------------------------------


def doc_row(tunable: tunables.Tunable) -> str:
    """The page's row for a directive (defaults unquoted: the page's runtime section backticks names only)."""
    default = tunable.default if tunable.default else "(empty)"
    return f"| `{tunable.name}` | {tunable.value.label} | {default} | {tunable.value.allowed} |"


def section(page: str, heading: str) -> str:
    return page.split(f"\n{heading}\n", 1)[1].split("\n#", 1)[0]


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| `")]


def test_reference_page_lists_each_directive_as_the_table_says() -> None:
    page = PAGE.read_text()
    runtime = section(page, "### Applied at runtime")
    startup = section(page, "### Startup-only directives")
    assert table_rows(runtime) == [doc_row(t) for t in tunables.TABLE if t.runtime]
    assert table_rows(startup) == [doc_row(t) for t in tunables.TABLE if not t.runtime]
    if not tunables.STARTUP_TUNABLES:
        assert "None" in startup
    assert "roll" in startup  # a startup-only change is a new pod template: the pods roll
    mentioned = set(re.findall(r"`([a-z0-9-]+)`", runtime + startup))
    assert mentioned <= tunables.TUNABLES, mentioned - tunables.TUNABLES


def test_the_operators_own_directives_are_probed_but_no_config_may_set_them() -> None:
    """The backup lowers repl-diskless-sync-delay for a moment; the probe reads it so the cluster's
    pass can put it back. A ValkeyConfig setting it would fight the operator: it is not a tunable."""
    assert tunables.OPERATOR_RUNTIME == {SYNC_DELAY: "5"}  # Valkey's own default: nodes start at it
    owned = tunables.operator_runtime(2)
    assert owned == {SYNC_DELAY: "5", tunables.SYNC_MAX_REPLICAS: "2"}
    assert not any(
        tunables.is_tunable(name) for name in (*owned, *tunables.ANNOUNCE_NAMES, *tunables.CLIENT_AUTH_NAMES)
    )
    assert (
        *tunables.RUNTIME_NAMES,
        SYNC_DELAY,
        tunables.SYNC_MAX_REPLICAS,
        *tunables.ANNOUNCE_NAMES,
        *tunables.CLIENT_AUTH_NAMES,
    ) == tunables.PROBED_NAMES
