"""Kubernetes quantities, exactly (they size maxmemory)."""

from __future__ import annotations

import contextlib
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from valkey_operator.api.quantity import parse_quantity, quantity_bytes

SUFFIXES = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1Gi", 1073741824),
        ("512Mi", 536870912),
        ("1.5Gi", 1610612736),
        ("1.5G", 1500000000),
        ("100k", 100000),
        ("128974848", 128974848),
        ("129e6", 129000000),
        ("129E6", 129000000),
        ("1e3", 1000),
        ("1E", 10**18),
        ("+2Ki", 2048),
        ("1.", 1),
        (".5Ki", 512),
        ("2000m", 2),
        (256, 256),
    ],
)
def test_quantities(text: str | int, expected: int) -> None:
    assert parse_quantity(text) == expected
    assert quantity_bytes(text) == expected


def test_fractions_and_rounding_up() -> None:
    assert parse_quantity("500m") == Fraction(1, 2)
    assert parse_quantity("1n") == Fraction(1, 10**9)
    assert quantity_bytes("500m") == 1
    assert quantity_bytes("1.0000001k") == 1001


@pytest.mark.parametrize(
    "text", ["", "Gi", "1K", "1gi", "1e", "1 Gi", "1Gi ", "0x10", "1..2", "e3", "1e9999", "--1"]
)
def test_rejects_what_is_not_a_quantity(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


@pytest.mark.parametrize("text", ["0", "-1Gi", 0])
def test_memory_must_be_positive(text: str | int) -> None:
    with pytest.raises(ValueError):
        quantity_bytes(text)


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from(sorted(SUFFIXES)))
def test_integer_with_suffix(number: int, suffix: str) -> None:
    assert parse_quantity(f"{number}{suffix}") == number * SUFFIXES[suffix]


@given(
    st.integers(min_value=0, max_value=10**9),
    st.integers(min_value=0, max_value=999),
    st.sampled_from(["Ki", "Mi", "Gi", "k", "M", "G"]),
)
def test_decimal_with_suffix(whole: int, thousandths: int, suffix: str) -> None:
    expected = (Fraction(whole) + Fraction(thousandths, 1000)) * SUFFIXES[suffix]
    assert parse_quantity(f"{whole}.{thousandths:03d}{suffix}") == expected


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=-20, max_value=20))
def test_exponents(number: int, exponent: int) -> None:
    assert parse_quantity(f"{number}e{exponent}") == number * Fraction(10) ** exponent


@given(st.text(max_size=20))
def test_never_fails_other_than_value_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        parse_quantity(text)
