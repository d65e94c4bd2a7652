"""Kubernetes resource quantities (the `resource.Quantity` grammar), exactly, as Fractions.

Needed for the maxmemory default (SPEC 1.2: about 75% of the memory limit).
The grammar is Kubernetes', not Valkey's: `1Gi`, `512Mi`, `1.5G`, `100k`,
`128974848`, `129e6`, `500m`. Uppercase `K` is not a Kubernetes suffix and is
rejected, as the API server's own admission check (isQuantity) does.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exponent>[eE][+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))"
)
_MAX_EXPONENT = 64
"""Far beyond any real quantity; bounds the work a hostile `1e999999999` can cause."""


def parse_quantity(value: str | int) -> Fraction:
    """The exact value of a quantity; ValueError when it is not one."""
    if isinstance(value, int):
        return Fraction(value)
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    number = Fraction(match["number"])
    if match["binary"]:
        return number * _BINARY[match["binary"]]
    if match["exponent"]:
        exponent = int(match["exponent"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f"quantity exponent out of range: {value!r}")
        return number * Fraction(10) ** exponent
    return number * _DECIMAL[match["decimal"]]


def quantity_bytes(value: str | int) -> int:
    """A memory quantity in whole bytes, rounded up as Kubernetes does; must be positive."""
    amount = parse_quantity(value)
    if amount <= 0:
        raise ValueError(f"memory quantity must be positive: {value!r}")
    return math.ceil(amount)
