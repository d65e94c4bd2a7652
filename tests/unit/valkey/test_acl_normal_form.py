"""Valkey's normal form of ACL rules, against ACL LIST lines real servers printed (9.1)."""

from __future__ import annotations

import pytest

from valkey_operator.valkey.acl import UserRules, normal_form, parse_acl_list, split_rules

HASH_A, HASH_B = "#" + "a" * 64, "#" + "b" * 64

# (rules given to ACL SETUSER, the line ACL LIST printed), captured from valkey-server 9.1.0.
PRINTED = [
    (
        "reset on +@all -get +get (~a +@read +@all -set) (~b +get -get +set -@write)",
        "user u1 on sanitize-payload resetchannels alldbs +@all +get (~a resetchannels alldbs +@all -set) "
        "(~b resetchannels alldbs -@all -get +set -@write)",
    ),
    (
        "reset off (~* &* +@all)",
        "user u2 off sanitize-payload resetchannels alldbs -@all (~* &* alldbs +@all)",
    ),
    ("reset on +@read -@read", "user y1 on sanitize-payload resetchannels alldbs -@all -@read"),
    ("reset on +@read +get +@read", "user y3 on sanitize-payload resetchannels alldbs -@all +get +@read"),
    ("reset on +get +@read -get", "user y4 on sanitize-payload resetchannels alldbs -@all +@read -get"),
    ("reset on +@all -@all +get", "user y5 on sanitize-payload resetchannels alldbs -@all +get"),
    ("reset on allcommands -get nocommands", "user y6 on sanitize-payload resetchannels alldbs -@all"),
    (
        "reset on +client|setname +client|getname +client",
        "user y7 on sanitize-payload resetchannels alldbs -@all +client",
    ),
    ("reset on ~a ~a %R~a &x &x", "user y8 on sanitize-payload ~a resetchannels &x alldbs -@all"),
    (
        f"reset on {HASH_B} {HASH_A} {HASH_B}",
        f"user y9 on sanitize-payload {HASH_B} {HASH_A} resetchannels alldbs -@all",
    ),
    ("reset on +config|get -config", "user z on sanitize-payload resetchannels alldbs -@all -config"),
    (
        "reset on -config +config|get +@read +@read",
        "user z2 on sanitize-payload resetchannels alldbs -@all -config +config|get +@read",
    ),
    (
        f"reset on {HASH_A} +cluster|slots +asking (~k* %R~r* &c +@read -@dangerous +get -set) (~x +@all)",
        f"user alice on sanitize-payload {HASH_A} resetchannels alldbs -@all +cluster|slots +asking "
        "(~k* %R~r* resetchannels &c alldbs -@all +@read -@dangerous +get -set) "
        "(~x resetchannels alldbs +@all)",
    ),
]


@pytest.mark.parametrize(("rules", "listed"), PRINTED)
def test_rules_and_what_valkey_lists_for_them_have_one_normal_form(rules: str, listed: str) -> None:
    (found,) = parse_acl_list([listed]).values()
    assert normal_form(split_rules(rules)) == found
    assert normal_form(split_rules(listed.split(" ", 2)[2])) == found  # idempotent on Valkey's output


def test_a_difference_valkey_would_enforce_is_a_difference() -> None:
    base = normal_form(split_rules("reset on (~app:* -@all +@read)"))
    for other in (
        "reset on (~app:* -@all +@read +flushall)",
        "reset on (~other:* -@all +@read)",
        "reset off (~app:* -@all +@read)",
        f"reset on {HASH_A} (~app:* -@all +@read)",
        "reset on (%R~app:* -@all +@read)",
        "reset on (~app:* &news -@all +@read)",
        "reset on (~app:* -@all +@read) (~x -@all +@read)",
        "reset on ~app:* (~app:* -@all +@read)",
    ):
        assert normal_form(split_rules(other)) != base, other


def test_an_unreadable_listing_never_compares_equal() -> None:
    users = parse_acl_list(["user odd on (~a unbalanced", "user good on resetchannels -@all"])
    assert users["odd"] == UserRules(enabled=False, nopass=True)
    assert users["good"] == normal_form(["reset", "on"])
    assert parse_acl_list(["not a user line"]) == {}
