"""Config chain resolution (pure): merge order, failures, hashing."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from controllers.shared.config_resolve import DEFAULT_POD_SECURITY, ResolutionFailure, ResolvedConfig, resolve

Obj = dict[str, Any]

IMAGES = {
    "v9": {
        "metadata": {"name": "v9"},
        "spec": {"repository": "valkey/valkey", "tag": "9.1.2", "version": "9.1.2"},
    }
}


def config(name: str, **spec: Any) -> Obj:
    return {"metadata": {"name": name}, "spec": spec}


def run(configs: list[Obj], name: str) -> ResolvedConfig | ResolutionFailure:
    by_name = {c["metadata"]["name"]: c for c in configs}
    return resolve(name, by_name.get, IMAGES.get)


def test_child_overrides_parent_key_by_key_and_image_comes_from_nearest() -> None:
    root = config(
        "root",
        imageRef="v9",
        resources={"cpu": "1", "memory": "1Gi"},
        valkey={"maxmemory-policy": "noeviction", "timeout": "0"},
    )
    middle = config(
        "middle", baseRef="root", valkey={"MAXMEMORY-POLICY": "allkeys-lru"}, podSecurity={"runAsUser": 1000}
    )
    leaf = config("leaf", baseRef="middle", resources={"memory": "2Gi"})
    resolved = run([root, middle, leaf], "leaf")
    assert isinstance(resolved, ResolvedConfig)
    assert resolved.chain == ("leaf", "middle", "root")
    assert resolved.image.name == "v9" and resolved.image.reference == "valkey/valkey:9.1.2"
    assert resolved.resources == {"cpu": "1", "memory": "2Gi"}
    assert resolved.valkey == {"maxmemory-policy": "allkeys-lru", "timeout": "0"}
    assert resolved.pod_security == {**DEFAULT_POD_SECURITY, "runAsUser": 1000}


def test_failures_name_their_reason() -> None:
    cases = {
        "BaseNotFound": ([config("a", baseRef="missing")], "a"),
        "BaseCycle": ([config("a", baseRef="b", imageRef="v9"), config("b", baseRef="a")], "a"),
        "ImageNotFound": ([config("a", imageRef="gone")], "a"),
    }
    for reason, (configs, name) in cases.items():
        outcome = run(configs, name)
        assert isinstance(outcome, ResolutionFailure), reason
        assert outcome.reason == reason
    no_image = run([config("a", valkey={"timeout": "1"})], "a")
    assert isinstance(no_image, ResolutionFailure) and no_image.reason == "ImageNotFound"
    assert "a -> b -> a" in run(cases["BaseCycle"][0], "a").message  # type: ignore[union-attr]
    assert "missing" in run(cases["BaseNotFound"][0], "a").message  # type: ignore[union-attr]


def chain_of(length: int) -> list[Obj]:
    configs = [config("c0", imageRef="v9")]
    configs += [config(f"c{i}", baseRef=f"c{i - 1}") for i in range(1, length)]
    return configs


def test_depth_limit_is_eight_configs() -> None:
    assert isinstance(run(chain_of(8), "c7"), ResolvedConfig)
    too_deep = run(chain_of(9), "c8")
    assert isinstance(too_deep, ResolutionFailure) and too_deep.reason == "TooDeep"


def test_settings_hash_tracks_effective_settings_only() -> None:
    base = [config("a", imageRef="v9", valkey={"timeout": "1"})]
    first = run(base, "a")
    same_effect = run([config("a", imageRef="v9", valkey={"TIMEOUT": "1"})], "a")
    changed = run([config("a", imageRef="v9", valkey={"timeout": "2"})], "a")
    assert isinstance(first, ResolvedConfig) and isinstance(same_effect, ResolvedConfig)
    assert isinstance(changed, ResolvedConfig)
    assert first.settings_hash == same_effect.settings_hash != changed.settings_hash


@given(st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=12))
def test_resolution_never_raises_on_arbitrary_reference_graphs(edges: list[int]) -> None:
    """Any graph of baseRefs (cycles, dangling refs, deep chains) resolves or fails with a reason."""
    configs = [
        config(f"c{i}", baseRef=f"c{target}" if target != i else None, imageRef="v9" if i == 0 else None)
        for i, target in enumerate(edges)
    ]
    for c in configs:
        c["spec"] = {k: v for k, v in c["spec"].items() if v is not None}
    for c in configs:
        outcome = run(configs, c["metadata"]["name"])
        assert isinstance(outcome, ResolvedConfig | ResolutionFailure)
        if isinstance(outcome, ResolvedConfig):
            assert len(outcome.chain) <= 8 and len(set(outcome.chain)) == len(outcome.chain)


def test_a_missing_root_config_is_not_a_missing_base() -> None:
    outcome = run([], "nowhere")
    assert isinstance(outcome, ResolutionFailure)
    assert outcome.reason == "ConfigNotFound" and "nowhere" in outcome.message


def test_limits_merge_key_by_key_apart_from_the_requests() -> None:
    root = config("root", imageRef="v9", resources={"cpu": "1", "memory": "1Gi", "limits": {"cpu": "4"}})
    leaf = config("leaf", baseRef="root", resources={"limits": {"memory": "2Gi"}})
    resolved = run([root, leaf], "leaf")
    assert isinstance(resolved, ResolvedConfig)
    assert resolved.resources == {"cpu": "1", "memory": "1Gi"}
    assert resolved.limits == {"cpu": "4", "memory": "2Gi"}
    assert resolved.memory_limit == "2Gi"


def test_memory_limit_defaults_to_the_request() -> None:
    resolved = run([config("a", imageRef="v9", resources={"memory": "1Gi"})], "a")
    assert isinstance(resolved, ResolvedConfig) and resolved.memory_limit == "1Gi" and not resolved.limits


def test_a_merged_limit_below_its_request_fails_resolution() -> None:
    root = config("root", imageRef="v9", resources={"memory": "2Gi", "limits": {"memory": "2Gi"}})
    leaf = config("leaf", baseRef="root", resources={"memory": "3Gi"})
    failed = run([root, leaf], "leaf")
    assert isinstance(failed, ResolutionFailure) and failed.reason == "LimitBelowRequest"
    assert "limits.memory 2Gi is below the memory request 3Gi" in failed.message


def test_a_digest_pins_the_reference_and_enters_the_hash_only_when_set() -> None:
    digest = "sha256:" + "ab" * 32
    images = {"v9": IMAGES["v9"], "pinned": {"spec": {**IMAGES["v9"]["spec"], "digest": digest}}}
    plain = resolve("a", {"a": config("a", imageRef="v9")}.get, images.get)
    pinned = resolve("a", {"a": config("a", imageRef="pinned")}.get, images.get)
    assert isinstance(plain, ResolvedConfig) and isinstance(pinned, ResolvedConfig)
    assert pinned.image.reference == f"valkey/valkey@{digest}"
    assert pinned.image.to_status()["digest"] == digest and "digest" not in plain.image.to_status()
    assert pinned.settings_hash != plain.settings_hash
    # a config without digest or limits keeps the hash it had before either existed
    assert plain.settings_hash == "f0135f088f6bb814"
