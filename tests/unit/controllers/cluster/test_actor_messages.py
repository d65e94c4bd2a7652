"""Pure parts around the actor: which directive a CONFIG SET refused (refusals.py), Valkey's own words."""

from __future__ import annotations

from controllers.cluster.actor import _valkey_message
from controllers.cluster.decision.refusals import refused_argument as _refused_argument


def test_the_refused_directive_is_read_from_valkeys_error() -> None:
    message = (
        "10.0.0.1: CONFIG SET: CONFIG SET failed (possibly related to argument 'maxmemory-policy') - "
        "argument(s) must be one of the following: volatile-lru, allkeys-lru, noeviction"
    )
    pending = {"maxmemory": "100mb", "maxmemory-policy": "sometimes"}
    assert _refused_argument(message, pending) == "maxmemory-policy"
    assert _refused_argument("ERR something else", pending) is None
    assert _refused_argument("argument 'hz'", pending) is None  # not one we sent


def test_valkeys_words_lose_the_admin_clients_prefix() -> None:
    text = "10.0.0.1: CONFIG SET: CONFIG SET failed (possibly related to argument 'x') - bad"
    assert _valkey_message(text) == "CONFIG SET failed (possibly related to argument 'x') - bad"
    assert _valkey_message("plain") == "plain"
