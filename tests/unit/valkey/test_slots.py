"""The operator's slot split, shared with the test bed's hand-built clusters."""

from __future__ import annotations

import itertools

import pytest

from valkey_operator.valkey.slots import SLOT_COUNT, even_ranges


@pytest.mark.parametrize("shards", [1, 2, 3, 4, 5, 7, 100, 500])
def test_the_ranges_cover_every_slot_once_in_near_equal_shares(shards: int) -> None:
    ranges = even_ranges(shards)
    assert ranges[0][0] == 0 and ranges[-1][1] == SLOT_COUNT - 1
    assert all(end + 1 == start for (_, end), (start, _) in itertools.pairwise(ranges))
    sizes = [end - start + 1 for start, end in ranges]
    assert max(sizes) - min(sizes) <= 1


def test_three_shards_split_as_the_operator_always_has() -> None:
    assert even_ranges(3) == ((0, 5460), (5461, 10921), (10922, 16383))


def test_a_cluster_has_at_least_one_shard() -> None:
    with pytest.raises(ValueError):
        even_ranges(0)
