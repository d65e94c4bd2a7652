"""Object names and labels: unique pod names per incarnation, selectors that match what they should."""

from __future__ import annotations

import random
import re

from hypothesis import given
from hypothesis import strategies as st

from controllers.shared import names

LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def test_pod_name_shape_and_determinism() -> None:
    first = names.pod_name("cache", 2, random.Random(7))
    assert first == names.pod_name("cache", 2, random.Random(7))
    assert re.fullmatch(rf"cache-2-[{names.SUFFIX_ALPHABET}]{{5}}", first)


def test_pod_name_fits_a_hostname_at_the_limits() -> None:
    longest = names.pod_name("c" * 50, 63, random.Random(1))  # admission: name <= 50, shards <= 64
    assert len(longest) <= 63
    assert DNS_LABEL.fullmatch(longest)


def test_pod_name_avoids_taken_names() -> None:
    taken = {names.pod_name("cache", 0, random.Random(3))}
    again = names.pod_name("cache", 0, random.Random(3), taken)
    assert again not in taken


class Repeating(random.Random):
    """Returns the same suffix twice, then another one: forces a collision."""

    def __init__(self) -> None:
        super().__init__(0)
        self.calls = 0

    def choice(self, seq):  # type: ignore[no-untyped-def,override]
        self.calls += 1
        return seq[0] if self.calls <= 10 else seq[1]


def test_pod_name_retries_on_collision() -> None:
    rng = Repeating()
    first = names.pod_name("cache", 1, rng)
    second = names.pod_name("cache", 1, rng, {first})
    assert first == "cache-1-bbbbb"
    assert second == "cache-1-ccccc"


@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=1, max_value=60))
def test_every_incarnation_gets_a_new_name(seed: int, count: int) -> None:
    rng = random.Random(seed)
    taken: set[str] = set()
    for _ in range(count):
        taken.add(names.pod_name("cache", 0, rng, taken))
    assert len(taken) == count


def test_labels_and_selectors() -> None:
    pod = names.pod_labels("cache", 1, "0123456789abcdef", "cache-1-bcdfg")
    assert pod == {
        "app.kubernetes.io/name": "valkey",
        "app.kubernetes.io/instance": "cache",
        "app.kubernetes.io/managed-by": "valkey-operator",
        "valkey.gomomento.com/cluster": "cache",
        "valkey.gomomento.com/shard": "1",
        "valkey.gomomento.com/template-hash": "0123456789abcdef",
        "valkey.gomomento.com/pod-name": "cache-1-bcdfg",
    }
    assert all(LABEL_VALUE.fullmatch(value) for value in pod.values())

    def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
        return all(labels.get(key) == value for key, value in selector.items())

    assert matches(names.cluster_selector("cache"), pod)
    assert matches(names.shard_selector("cache", 1), pod)
    assert not matches(names.shard_selector("cache", 0), pod)
    assert not matches(names.cluster_selector("cache-1"), pod)
    assert not matches(names.shard_selector("cache", 1), names.pod_labels("other", 1, "x", "other-1-bcdfg"))


def test_shard_of() -> None:
    assert names.shard_of(names.pod_labels("cache", 12, "h", "cache-12-bcdfg")) == 12
    assert names.shard_of({}) is None
    assert names.shard_of({names.SHARD_LABEL: "x"}) is None
    assert names.shard_of({names.SHARD_LABEL: "²"}) is None


def test_object_names() -> None:
    assert names.service_name("cache") == "cache"
    assert names.config_map_name("cache") == "cache-config"
    assert names.secret_name("cache") == "cache-internal"
    assert names.pdb_name("cache", 3) == "cache-3"
