"""How Valkey reads a tunable's value and prints it back: one class per value type.

`canonical(text)` is what `CONFIG GET` prints after `CONFIG SET` of `text`, or
None when Valkey refuses the value (wrong syntax or out of range). Each type
mirrors Valkey's own parser (src/config.c, src/util.c, src/notify.c), quirks
included, because the planner compares these strings with what live nodes
report: a mismatch means a CONFIG SET on every pass. Checked against real
9.0 and 9.1 servers by tests/integration/api/test_tunables_server.py.

Runtime-only refusals (an apply hook saying no, as for `maxclients` above the
file limit or `activedefrag yes` without jemalloc's defrag support) are not
syntax: `canonical` accepts those values and only a live node can refuse them.
"""

from __future__ import annotations

import math
import re

import attrs

U64 = 1 << 64
INT_MAX = (1 << 31) - 1
INT_MIN = -(1 << 31)
UINT_MAX = (1 << 32) - 1
LLONG_MAX = (1 << 63) - 1
LLONG_MIN = -(1 << 63)
LONG_MAX = LLONG_MAX
SSIZE_MAX = LLONG_MAX
ULLONG_MAX = U64 - 1

# memtoull's units (case-insensitive): k, m, g are powers of 1000; kb, mb, gb powers of 1024.
MEMORY_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1024,
    "m": 1000**2,
    "mb": 1024**2,
    "g": 1000**3,
    "gb": 1024**3,
}
_MEMORY = re.compile(r"([0-9]*)([A-Za-z]*)", re.ASCII)
_MEMORY_DIGITS_MAX = 127  # memtoull copies the digits into a 128-byte buffer
_LONG_STR_SIZE = 21  # string2ll refuses 21 characters or more


@attrs.frozen
class Dialect:
    """Where supported releases parse numbers differently (everything else reads the same)."""

    saturating_memory: bool
    """9.0: a byte count above 2^64-1 reads as 2^64-1; 9.1 refuses it."""
    hex_doubles: bool
    """9.0 reads percentiles with strtod, so "0x10" is 16; 9.1 refuses hexadecimal."""


NEWEST = Dialect(saturating_memory=False, hex_doubles=False)
"""Valkey 9.1 and later."""
LEGACY = Dialect(saturating_memory=True, hex_doubles=True)
"""Valkey 9.0 and earlier."""


def dialect_for(version: tuple[int, ...] | None) -> Dialect:
    """The parsing dialect of a release (MAJOR, MINOR[, PATCH]); None means the newest."""
    return NEWEST if version is None or tuple(version[:2]) >= (9, 1) else LEGACY


def parse_ll(text: str) -> int | None:
    """Valkey's string2ll: optional '-', digits without leading zeros, within long long; else None."""
    if not text or len(text) >= _LONG_STR_SIZE:
        return None
    if text == "0":
        return 0
    digits = text[1:] if text.startswith("-") else text
    if not digits or not digits.isascii() or not digits.isdigit() or digits[0] == "0":
        return None
    value = -int(digits) if text.startswith("-") else int(digits)
    return value if LLONG_MIN <= value <= LLONG_MAX else None


def parse_memory(text: str, dialect: Dialect = NEWEST) -> int | None:
    """Valkey's memtoull: digits then an optional unit, as an unsigned 64-bit value; else None.

    No sign, no spaces, no fractions, leading zeros allowed. Empty digits read as 0 ("" and
    "mb" are 0 bytes). A number above 2^64-1 is refused (9.0: saturates), and the unit
    multiplication wraps modulo 2^64 unchecked ("17179869184gb" is 0), as the C code does.
    """
    match = _MEMORY.fullmatch(text)
    if match is None:
        return None
    digits, unit = match.groups()
    multiplier = MEMORY_UNITS.get(unit.lower())
    if multiplier is None or len(digits) > _MEMORY_DIGITS_MAX:
        return None
    number = int(digits) if digits else 0
    if number > ULLONG_MAX:
        if not dialect.saturating_memory:
            return None
        number = ULLONG_MAX
    return number * multiplier % U64


def _signed(value: int) -> int:
    """A 64-bit unsigned value reinterpreted as long long."""
    return value - U64 if value > LLONG_MAX else value


@attrs.frozen
class Integer:
    """A plain integer (Valkey's INTEGER_CONFIG); unsigned C types refuse negatives by wrapping."""

    minimum: int
    maximum: int
    unsigned: bool = False
    clamp: tuple[int, int] | None = None
    """Valkey accepts any value in range and then caps it to these bounds (hz: 1..500)."""

    @property
    def label(self) -> str:
        return "integer"

    @property
    def allowed(self) -> str:
        text = f"{_bound(self.minimum)} to {_bound(self.maximum)}"
        if self.clamp:
            text += f" (kept within {self.clamp[0]} to {self.clamp[1]})"
        return text

    def canonical(self, text: str, dialect: Dialect = NEWEST) -> str | None:
        value = parse_ll(text)
        if value is None:
            return None
        checked = value % U64 if self.unsigned else value
        if not self.minimum <= checked <= self.maximum:
            return None
        if self.clamp:
            value = min(max(value, self.clamp[0]), self.clamp[1])
        return str(value)


@attrs.frozen
class Memory:
    """A byte count with an optional unit (MEMORY_CONFIG); printed back as plain bytes.

    With `percent`, "N%" (0..100 of maxmemory) is accepted too, stored as -N and printed as "N%"
    ("0%" is stored as 0 and prints "0"). `signed` is the C type: a wrapped memory value above
    LLONG_MAX reads as negative there, as Valkey's own boundary check sees it.
    """

    minimum: int
    maximum: int
    percent: bool = False
    signed: bool = False

    @property
    def label(self) -> str:
        return "bytes or percent" if self.percent else "bytes"

    @property
    def allowed(self) -> str:
        text = f"{_bound(self.minimum)} to {_bound(self.maximum)} bytes"
        return text + ", or 0% to 100% of maxmemory" if self.percent else text

    def canonical(self, text: str, dialect: Dialect = NEWEST) -> str | None:
        stored = self._parse(text, dialect)
        if stored is None:
            return None
        if self.signed and stored < 0:  # a percentage (or a wrapped byte count that looks like one)
            if not self.percent or stored < -100:
                return None
            return f"{-stored}%"
        if not self.minimum <= stored <= self.maximum:
            return None
        return str(stored)

    def _parse(self, text: str, dialect: Dialect) -> int | None:
        memory = parse_memory(text, dialect)
        if memory is not None:
            return _signed(memory) if self.signed else memory
        if self.percent and len(text) > 1 and text.endswith("%"):
            number = parse_ll(text[:-1])
            if number is not None and number >= 0:
                return -number
        return None


@attrs.frozen
class Boolean:
    """yes or no, case-insensitive; printed lowercase."""

    @property
    def label(self) -> str:
        return "boolean"

    @property
    def allowed(self) -> str:
        return "yes, no"

    def canonical(self, text: str, dialect: Dialect = NEWEST) -> str | None:
        lowered = text.lower() if text.isascii() else ""  # strcasecmp folds ASCII only
        return lowered if lowered in ("yes", "no") else None


@attrs.frozen
class Enum:
    """One of a fixed set of names, case-insensitive; printed as the table spells it."""

    choices: tuple[str, ...]

    @property
    def label(self) -> str:
        return "enum"

    @property
    def allowed(self) -> str:
        return ", ".join(self.choices)

    def canonical(self, text: str, dialect: Dialect = NEWEST) -> str | None:
        lowered = text.lower() if text.isascii() else ""
        return lowered if lowered in self.choices else None


# Valkey's string2d grammar: a decimal floating point number (9.0 also takes strtod's hexadecimal).
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_HEX = re.compile(r"[+-]?0[xX](?:[0-9a-f]+(?:\.[0-9a-f]*)?|\.[0-9a-f]+)(?:[pP][+-]?[0-9]+)?", re.ASCII | re.I)


def parse_double(text: str, dialect: Dialect = NEWEST) -> float | None:
    """Valkey's string2d: a whole number, nothing around it, not inf or nan, no underflow to 0.

    A denormal result is accepted (4.9e-324), one that rounds to zero is refused (2.4e-324).
    """
    if _DECIMAL.fullmatch(text):
        value = float(text)
        mantissa = re.split(r"[eE]", text, maxsplit=1)[0]
    elif dialect.hex_doubles and _HEX.fullmatch(text):
        value = float.fromhex(text)
        mantissa = re.split(r"[pP]", text, maxsplit=1)[0].lower().replace("0x", "", 1)
    else:
        return None
    if math.isinf(value) or (value == 0 and re.search(r"[1-9a-f]", mantissa)):
        return None
    return value


def format_percentile(value: float) -> str:
    """printf("%f") with trailing zeros (and a bare '.') trimmed, as Valkey prints doubles here."""
    return f"{value:f}".rstrip("0").rstrip(".")


@attrs.frozen
class Percentiles:
    """Space-separated percentiles in [0, 100] (latency-tracking-info-percentiles); "" is none.

    CONFIG SET splits on single spaces, so two spaces in a row (or a leading or trailing
    space) make an empty item, which Valkey refuses. Each prints as "%f" trimmed: "99.90" is "99.9".
    """

    @property
    def label(self) -> str:
        return "percentiles"

    @property
    def allowed(self) -> str:
        return "numbers 0 to 100 separated by single spaces; empty for none"

    def canonical(self, text: str, dialect: Dialect = NEWEST) -> str | None:
        if text == "":
            return ""
        printed = []
        for item in text.split(" "):
            value = parse_double(item, dialect)
            if value is None or not 0.0 <= value <= 100.0:
                return None
            printed.append(format_percentile(value))
        return " ".join(printed)


@attrs.frozen
class KeyspaceEvents:
    """notify-keyspace-events class characters (case-sensitive), printed in Valkey's own order.

    'A' stands for every type class (`all_classes`); Valkey prints 'A' when all of them are set
    and then omits the classes outside 'A' that precede K, E and m in its order (so "An" prints "A").
    """

    all_classes: str = "g$lshzxetd"
    order: str = "g$lshzxetdn"
    """The type classes in the order Valkey prints them (when not all of 'A' is set)."""
    trailing: str = "KEm"
    """Printed after the type classes, always: keyspace, keyevent, key-miss."""

    @property
    def label(self) -> str:
        return "event flags"

    @property
    def allowed(self) -> str:
        return f"any of A{self.order}{self.trailing}; empty for none"

    def canonical(self, text: str, dialect: Dialect = NEWEST) -> str | None:
        known = set(self.order) | set(self.trailing)
        flags: set[str] = set()
        for char in text:
            if char == "A":
                flags |= set(self.all_classes)
            elif char in known:
                flags.add(char)
            else:
                return None
        if set(self.all_classes) <= flags:
            head = "A"
        else:
            head = "".join(char for char in self.order if char in flags)
        return head + "".join(char for char in self.trailing if char in flags)


ValueType = Integer | Memory | Boolean | Enum | Percentiles | KeyspaceEvents


def _bound(value: int) -> str:
    """A bound as the docs show it: the C type limits as powers of two, the rest as numbers."""
    names = {
        INT_MAX: "2^31-1",
        INT_MIN: "-2^31",
        UINT_MAX: "2^32-1",
        LLONG_MAX: "2^63-1",
        ULLONG_MAX: "2^64-1",
    }
    return names.get(value, str(value))
