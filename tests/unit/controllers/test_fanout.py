"""The shared index's fan-out: an edit enqueues exactly the clusters that resolve through it (pure).

Informers that never start: their stores are filled by hand, the index functions are the real ones.
"""

from __future__ import annotations

from typing import Any

from controllers.indexes import (
    CLUSTERS_BY_CONFIG,
    CLUSTERS_BY_PASSWORD_SECRET,
    CLUSTERS_BY_ROLE,
    CLUSTERS_ROLLING,
    CONFIGS_BY_BASE,
    CONFIGS_BY_IMAGE,
    ReferenceIndex,
    cluster_config_ref,
    cluster_password_secrets,
    cluster_role_refs,
    cluster_rolling,
    config_base_ref,
    config_image_ref,
)
from valkey_operator.api.resources import (
    VALKEY_BACKUPS,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
    VALKEY_ROLES,
)
from valkey_operator.core.informer import SharedInformer


def informer(resource: Any, indexers: dict[str, Any] | None = None) -> SharedInformer:
    return SharedInformer(None, resource, indexers=indexers)  # type: ignore[arg-type]  # never started


def config(name: str, *, image: str | None = None, base: str | None = None) -> dict:
    spec = {key: value for key, value in (("imageRef", image), ("baseRef", base)) if value}
    return {"metadata": {"name": name}, "spec": spec}


def cluster(namespace: str, name: str, config_ref: str, *, rolling: bool = False) -> dict:
    body: dict = {"metadata": {"name": name, "namespace": namespace}, "spec": {"configRef": config_ref}}
    if rolling:
        body["status"] = {"rollout": {"shards": 3, "shardsUpdated": 1}}
    return body


def index() -> ReferenceIndex:
    configs = informer(VALKEY_CONFIGS, {CONFIGS_BY_IMAGE: config_image_ref, CONFIGS_BY_BASE: config_base_ref})
    clusters = informer(
        VALKEY_CLUSTERS,
        {
            CLUSTERS_BY_CONFIG: cluster_config_ref,
            CLUSTERS_BY_ROLE: cluster_role_refs,
            CLUSTERS_ROLLING: cluster_rolling,
        },
    )
    # base <- mid <- leaf (a chain), other (unrelated, same image), lone (another image)
    for body in (
        config("base", image="v9"),
        config("mid", base="base"),
        config("leaf", base="mid"),
        config("other", image="v9"),
        config("lone", image="v8"),
    ):
        configs.store.add(body)
    for body in (
        cluster("a", "on-base", "base"),
        cluster("a", "on-mid", "mid"),
        cluster("b", "on-leaf", "leaf", rolling=True),
        cluster("b", "on-other", "other"),
        cluster("c", "on-lone", "lone", rolling=True),
    ):
        clusters.store.add(body)
    return ReferenceIndex(
        informer(VALKEY_IMAGES), configs, informer(VALKEY_ROLES), clusters, informer(VALKEY_BACKUPS)
    )


def test_a_chain_edit_enqueues_exactly_the_clusters_resolving_through_it() -> None:
    refs = index()
    assert refs.clusters_through_configs(["base"]) == ["a/on-base", "a/on-mid", "b/on-leaf"]
    assert refs.clusters_through_configs(["mid"]) == ["a/on-mid", "b/on-leaf"]
    assert refs.clusters_through_configs(["leaf"]) == ["b/on-leaf"]
    assert refs.clusters_through_configs(["lone"]) == ["c/on-lone"]


def test_an_image_edit_enqueues_every_cluster_of_every_config_using_it_through_any_chain() -> None:
    refs = index()
    assert refs.clusters_through_image("v9") == ["a/on-base", "a/on-mid", "b/on-leaf", "b/on-other"]
    assert refs.clusters_through_image("v8") == ["c/on-lone"]
    assert refs.clusters_through_image("v7") == []


def test_the_rolling_clusters_are_an_index_not_a_list() -> None:
    assert sorted(index().clusters_rolling()) == ["b/on-leaf", "c/on-lone"]


def test_a_password_secret_enqueues_the_clusters_whose_users_name_it() -> None:
    clusters = informer(VALKEY_CLUSTERS, {CLUSTERS_BY_PASSWORD_SECRET: cluster_password_secrets})
    users = [
        {"username": "a", "passwordSecretName": "shared"},
        {"username": "b", "passwordSecretName": "shared"},
        {"username": "c", "passwordHashes": ["0" * 64]},
        {"username": "d"},
    ]
    for namespace, name, acl in (("x", "one", users), ("x", "two", users[:1]), ("y", "three", users)):
        body = cluster(namespace, name, "base")
        body["spec"]["acl"] = acl
        clusters.store.add(body)
    refs = ReferenceIndex(
        informer(VALKEY_IMAGES),
        informer(VALKEY_CONFIGS),
        informer(VALKEY_ROLES),
        clusters,
        informer(VALKEY_BACKUPS),
    )
    assert cluster_password_secrets(clusters.store.get_by_key("x/one")) == ["x/shared"]
    assert sorted(refs.clusters_using_password_secret("x", "shared")) == ["x/one", "x/two"]
    assert refs.clusters_using_password_secret("y", "shared") == ["y/three"]
    assert refs.clusters_using_password_secret("x", "one-d") == []
