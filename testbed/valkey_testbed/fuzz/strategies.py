"""What the fuzzer writes: hypothesis strategies for the four kinds, valid, near-valid and hostile.

Names come from a small pool per kind, so references between drawn objects hit, miss and form
baseRef cycles, and a write often lands on an object that exists (an update, where the transition
rules apply). Huge lists and maps are built from one small draw (their size), so hypothesis's buffer
stays small. Image repositories live under fuzz.invalid/, which no catalog image answers: pods of
an accepted cluster wait for their image instead of starting servers, keeping a long run cheap.
"""

from __future__ import annotations

import hashlib
from typing import Any

import attrs
from hypothesis import strategies as st

from valkey_operator.api.cluster import KeyAccess, TaintEffect, TolerationOperator, ZoneSpread
from valkey_operator.api.config import Appendfsync, PersistenceMode, ReclaimPolicy
from valkey_operator.api.resources import (
    PAUSED_ANNOTATION,
    RESERVED_USERNAMES,
    RESTARTED_AT_ANNOTATION,
    SWITCHOVER_ANNOTATION,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
    VALKEY_ROLES,
)
from valkey_operator.api.role import Access, AclCategory
from valkey_operator.api.tunables import TUNABLES
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj

RUN_LABEL = "fuzz.valkey.gomomento.com/run"
"""Every object a run writes carries this label (value: the run id), so the run can find its own."""
REPOSITORY = "fuzz.invalid/valkey"
PROPAGATIONS = ("Background", "Foreground", "Orphan")

Draw = st.SearchStrategy[Any]

JSON_INTEGERS = st.integers(-(2**63), 2**64 - 1)
"""Every integer a JSON encoder here can write (orjson: 64-bit signed or unsigned)."""


@attrs.frozen
class Pool:
    """The names one run writes: a few per kind, cluster-scoped ones prefixed with the run id."""

    run: str
    namespace: str
    images: tuple[str, ...]
    configs: tuple[str, ...]
    roles: tuple[str, ...]
    clusters: tuple[str, ...]

    @classmethod
    def of(cls, run: str, namespace: str) -> Pool:
        return cls(
            run=run,
            namespace=namespace,
            images=tuple(f"{run}-image-{i}" for i in range(3)),
            configs=tuple(f"{run}-config-{i}" for i in range(5)),
            roles=tuple(f"{run}-role-{i}" for i in range(3)),
            clusters=tuple(f"cache-{i}" for i in range(4)),
        )


@attrs.frozen
class Write:
    """Create the object; if it exists, replace its spec (and annotations) instead."""

    resource: Resource
    body: Obj

    @property
    def name(self) -> str:
        return str(self.body["metadata"].get("name"))

    @property
    def namespace(self) -> str | None:
        namespace = self.body["metadata"].get("namespace")
        return str(namespace) if namespace is not None else None


@attrs.frozen
class Delete:
    resource: Resource
    name: str
    namespace: str | None
    propagation: str


Op = Write | Delete


# ---- scalars ---------------------------------------------------------------------------------------
def unicode_text(max_size: int = 24) -> Draw:
    """Any text JSON can carry (no lone surrogates): control characters, emoji, right-to-left."""
    return st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=max_size)


SPECIAL_STRINGS = (
    "",
    " ",
    "\t",
    "\n",
    "a\nb",
    "a\rb",
    "\x00",
    "\x7f",
    "ünïcødé",
    "名前",
    "\u202eevil",
    "😀",
    "$(POD_IP)",
    "${HOME}",
    "'; DROP",
    '"quoted"',
    "back\\slash",
    "%s%n",
    "../..",
    "a/b",
    "-leading",
    "trailing-",
    "UPPER",
    "x" * 63,
    "x" * 64,
    "x" * 253,
    "x" * 254,
)


def hostile_text() -> Draw:
    return st.one_of(st.sampled_from(SPECIAL_STRINGS), unicode_text(), st.integers(0, 5000).map("y".__mul__))


def wrong_type() -> Draw:
    """A JSON value of some other type than the schema asks for."""
    return st.sampled_from([None, True, 1.5, -1, "3", [], {}, ["a"], {"a": 1}])


def boundary_int(low: int, high: int) -> Draw:
    """Values at and just beyond [low, high], the int32/int64 edges, and now and then any integer."""
    edges = sorted(
        {low - 1, low, low + 1, high - 1, high, high + 1, 0, -1, 2**31 - 1, 2**31, 2**63 - 1, -(2**63)}
    )
    return st.one_of(st.integers(low, min(high, low + 3)), st.sampled_from(edges), JSON_INTEGERS)


HOSTILE = st.sampled_from((False,) * 6 + (True,) + (False,) * 5)
"""Whether a field with hostile alternatives takes one: 1 in 12. A cluster has about ten such
fields, so about two in five drawn clusters are valid throughout and most of the rest break in one
place. (hypothesis favours the ends of a range, so the one True sits in the middle.)"""


def sometimes(strategy: Draw, *hostile: Draw) -> Draw:
    """Mostly strategy; now and then (HOSTILE) one of the hostile alternatives."""
    if not hostile:
        return strategy
    odd = choose(*hostile)
    return HOSTILE.flatmap(lambda take: odd if take else strategy)


def choose(*strategies: Draw) -> Draw:
    """One of strategies, each equally likely (st.one_of flattens nested one_ofs, which skews the
    weights towards whichever branch has the most alternatives)."""
    if len(strategies) == 1:
        return strategies[0]
    return st.integers(0, len(strategies) - 1).flatmap(lambda index: strategies[index])


def ref(names: tuple[str, ...], run: str) -> Draw:
    """A reference: usually a pool name (hit or miss), else a missing or malformed name."""
    return sometimes(st.sampled_from(names), st.just(f"{run}-missing"), hostile_text())


def sha(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def fields(required: dict[str, Draw], optional: dict[str, Draw]) -> Draw:
    """An object of required fields (now and then one dropped) and optional ones (each maybe present)."""
    drawn = st.fixed_dictionaries(required, optional=optional)
    if not required:
        return drawn
    keys = sorted(required)
    return drawn.flatmap(lambda obj: sometimes(st.just(obj), _drop_one(obj, keys)))


def _drop_one(obj: dict[str, Any], keys: list[str]) -> Draw:
    return st.sampled_from(keys).map(lambda key: {k: v for k, v in obj.items() if k != key})


# ---- the kinds -------------------------------------------------------------------------------------
VERSIONS = ("9.0.1", "9.1.0", "9.1.2", "10.0.0", "999999999.0.0")
"""Image versions the floor admits, up to the largest the schema's pattern allows."""
BAD_VERSIONS = ("9.0.0", "8.1.8", "v9.1.0", "9.1", "09.1.0", "1000000000.0.0", "9.1.0-rc1", "9.1.0+b", "")
"""Each way of missing it: below the floor, malformed, too large."""


def image_spec() -> Draw:
    return fields(
        {
            "repository": sometimes(
                st.from_regex(r"fuzz\.invalid/[a-z0-9]{1,12}", fullmatch=True),
                st.just(f"{REPOSITORY}/" + "r" * 493),
                st.just(f"{REPOSITORY}/" + "r" * 494),
                hostile_text().map(lambda text: f"fuzz.invalid/{text}" if text else text),
                wrong_type(),
            ),
            "tag": sometimes(st.sampled_from(["9.1.2", "9.0.1", "latest"]), hostile_text(), wrong_type()),
            "version": sometimes(st.sampled_from(VERSIONS), st.sampled_from(BAD_VERSIONS), hostile_text()),
        },
        {},
    )


def quantity() -> Draw:
    return sometimes(
        st.sampled_from(["500m", "2", 1, "1Gi", "512Mi", "1e9", "100m", "64Mi"]),
        st.sampled_from(
            ["0", 0, "-1", "1e308", "9999999999999999999Ei", "0.000001", "1.5", "1GB", "Infinity"]
        ),
        JSON_INTEGERS,
        hostile_text(),
        wrong_type(),
    )


def directive_name() -> Draw:
    owned = ["port", "bind", "requirepass", "dir", "save", "include", "loadmodule", "rename-command"]
    return sometimes(
        st.sampled_from(sorted(TUNABLES)),
        st.sampled_from(sorted(TUNABLES)).map(str.upper),
        st.sampled_from(owned),
        hostile_text(),
    )


def directive_value() -> Draw:
    return sometimes(
        st.sampled_from(["100mb", "allkeys-lru", "10", "yes", "no", "-1", "50 99 99.9", "KEA", "25%", ""]),
        st.sampled_from(["1gb\nport 7000", "0\r", "x" * 1024, "x" * 1025, "18446744073709551616"]),
        hostile_text(),
        wrong_type(),
    )


def valkey_settings() -> Draw:
    huge = st.integers(60, 400).map(lambda n: {f"x{i}": "1" for i in range(n)})
    every = st.just({name: "1" for name in sorted(TUNABLES)})
    return sometimes(
        st.dictionaries(directive_name(), directive_value(), max_size=5), huge, every, wrong_type()
    )


def pod_ids() -> Draw:
    ids = boundary_int(1, 2**31 - 1)
    return st.fixed_dictionaries({}, optional={"runAsUser": ids, "runAsGroup": ids, "fsGroup": ids})


def persistence() -> Draw:
    """Mostly a valid shape (none, rdb with a size, aof with a size and maybe appendfsync); now and
    then any mix (aof-only fields with the wrong mode, a mode without a size) or another type. The
    same name written again grows, shrinks or breaks its size (the transition rule)."""

    def valid(enum: type[PersistenceMode] | type[Appendfsync] | type[ReclaimPolicy]) -> Draw:
        return st.sampled_from([member.value for member in enum])

    mode = sometimes(valid(PersistenceMode), st.sampled_from(["RDB", "both", ""]), wrong_type())
    fsync = sometimes(valid(Appendfsync), st.sampled_from(["no", "Always"]))
    claims = {
        "storageClassName": sometimes(st.sampled_from(["local-path", "fast"]), hostile_text()),
        "reclaimPolicy": sometimes(valid(ReclaimPolicy), st.sampled_from(["delete", "Recycle"])),
    }
    shapes = choose(
        fields({}, {"mode": st.just("none"), "size": quantity()}),
        fields({"mode": st.just("rdb"), "size": quantity()}, claims),
        fields({"mode": st.just("aof"), "size": quantity()}, {"appendfsync": fsync, **claims}),
    )
    mixed = st.fixed_dictionaries(
        {}, optional={"mode": mode, "size": quantity(), "appendfsync": fsync, **claims}
    )
    return sometimes(shapes, mixed, wrong_type())


def config_spec(pool: Pool) -> Draw:
    """imageRef, baseRef or both (now and then neither, which admission refuses), and the rest."""
    resources = st.fixed_dictionaries({}, optional={"cpu": quantity(), "memory": quantity()})
    rest = {
        "resources": sometimes(resources, wrong_type()),
        "valkey": valkey_settings(),
        "podSecurity": sometimes(pod_ids(), wrong_type()),
        "persistence": persistence(),
    }
    image, base = ref(pool.images, pool.run), ref(pool.configs, pool.run)
    return sometimes(
        choose(
            fields({"imageRef": image}, rest),
            fields({"baseRef": base}, rest),
            fields({"imageRef": image, "baseRef": base}, rest),
        ),
        fields({}, rest),
    )


def rule_list(names: Draw, huge: int) -> Draw:
    """Rules unique by name, as the schema's list-map wants; now and then with repeats or empty."""
    access = sometimes(st.sampled_from([a.value for a in Access]), hostile_text())
    entry = fields({"name": names}, {"access": access})
    many = st.integers(huge, huge * 3).map(lambda n: [{"name": f"cmd{i}"} for i in range(n)])
    unique = st.lists(entry, min_size=1, max_size=6, unique_by=lambda rule: str(rule.get("name")))
    return sometimes(unique, st.lists(entry, max_size=6), many, wrong_type())


def role_spec() -> Draw:
    categories = [c.value for c in AclCategory]
    category = sometimes(
        st.sampled_from(categories), st.sampled_from(["reads", "@read", "ALL", ""]), hostile_text()
    )
    command = sometimes(
        st.sampled_from(["get", "set", "client|kill", "config|get", "flushall"]),
        st.sampled_from(["GET", "config get", "a|b|c", "", "x" * 65]),
        hostile_text(),
    )
    every = st.just([{"name": c, "access": "deny"} for c in categories])
    return fields(
        {"categories": st.one_of(rule_list(category, len(categories)), every)},
        {"commands": rule_list(command, 129)},
    )


def acl_users(pool: Pool) -> Draw:
    username = sometimes(
        st.sampled_from(["app", "reporting", "team.app-1_x", "Default"]),
        st.sampled_from(RESERVED_USERNAMES),
        hostile_text(),
    )
    hashes = sometimes(
        st.lists(st.integers(0, 20).map(sha), min_size=1, max_size=3),
        st.sampled_from([[], [sha(1).upper()], [sha(1)[:63]], [sha(1) + "0"], ["g" * 64], [sha(1), sha(1)]]),
        st.integers(9, 40).map(lambda n: [sha(i) for i in range(n)]),
    )
    pattern = sometimes(
        st.sampled_from(["app:*", "*", "app:{user}:[a-z]?*"]),
        st.sampled_from(["a *", "x)(~*", ""]),
        hostile_text(),
    )
    key = fields({"pattern": pattern}, {"access": sometimes(st.sampled_from([k.value for k in KeyAccess]))})
    permission = fields(
        {"roleRef": ref(pool.roles, pool.run)},
        {"keys": st.lists(key, max_size=3), "channels": st.lists(pattern, max_size=3)},
    )
    user = fields(
        {
            "username": username,
            "passwordHashes": hashes,
            "permissions": st.lists(permission, min_size=0, max_size=3),
        },
        {},
    )
    many = st.integers(65, 130).map(
        lambda n: [
            {"username": f"u{i}", "passwordHashes": [sha(i)], "permissions": [{"roleRef": pool.roles[0]}]}
            for i in range(n)
        ]
    )
    return sometimes(st.lists(user, max_size=3), many, wrong_type())


def toleration() -> Draw:
    return st.fixed_dictionaries(
        {},
        optional={
            "key": sometimes(st.sampled_from(["dedicated", "example.com/pool", ""]), hostile_text()),
            "operator": sometimes(st.sampled_from([o.value for o in TolerationOperator]), st.just("In")),
            "value": sometimes(st.sampled_from(["cache", ""]), hostile_text()),
            "effect": sometimes(st.sampled_from([e.value for e in TaintEffect]), st.just("Evict")),
            "tolerationSeconds": boundary_int(0, 3600),
        },
    )


def label_map(max_value: int) -> Draw:
    keys = sometimes(
        st.sampled_from(
            ["example.com/pool", "team", "topology.kubernetes.io/zone", "kubernetes.io/hostname"]
        ),
        hostile_text(),
        st.just(PAUSED_ANNOTATION),
    )
    values = sometimes(st.sampled_from(["a", "b", "cache", "true", ""]), hostile_text())
    huge = st.integers(30, 80).map(lambda n: {f"example.com/k{i}": "v" * max_value for i in range(n)})
    return sometimes(st.dictionaries(keys, values, max_size=4), huge, wrong_type())


def placement(pool: Pool) -> Draw:
    zones = sometimes(
        st.lists(st.sampled_from(["a", "b", "c", "zone-x"]), max_size=4),
        st.lists(hostile_text(), max_size=3),
        st.integers(17, 40).map(lambda n: [f"z{i}" for i in range(n)]),
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "zones": zones,
            "zoneSpread": sometimes(st.sampled_from([z.value for z in ZoneSpread]), st.just("strict")),
            "nodeSelector": label_map(63),
            "tolerations": sometimes(
                st.lists(toleration(), max_size=3),
                st.integers(33, 60).map(lambda n: [{"operator": "Exists"}] * n),
            ),
            "priorityClassName": sometimes(
                st.sampled_from(["system-cluster-critical", f"{pool.run}-missing"]), hostile_text()
            ),
        },
    )


def cluster_spec(pool: Pool) -> Draw:
    return fields(
        {"configRef": ref(pool.configs, pool.run)},
        {
            "shards": sometimes(st.integers(1, 3), boundary_int(1, 64), wrong_type()),
            "replicasPerShard": sometimes(st.integers(0, 1), boundary_int(0, 5), wrong_type()),
            "acl": acl_users(pool),
            "tls": sometimes(
                st.fixed_dictionaries({"secretRef": ref((f"{pool.run}-tls",), pool.run)}),
                st.just({}),
                wrong_type(),
            ),
            "placement": sometimes(placement(pool), wrong_type()),
            "podAnnotations": label_map(4096),
            "metrics": sometimes(
                st.fixed_dictionaries(
                    {"exporter": sometimes(st.fixed_dictionaries({"enabled": st.booleans()}), wrong_type())}
                ),
                wrong_type(),
            ),
        },
    )


def metadata(pool: Pool, names: tuple[str, ...], namespaced: bool) -> Draw:
    name = sometimes(
        st.sampled_from(names),
        st.sampled_from(["1cache", "Cache", "c" * 51, "c" * 50, "cache_0", ""]),
        hostile_text().map(lambda text: f"{pool.run}-{text}" if not namespaced else text),
    )
    switchover = st.one_of(
        st.sampled_from(["0", "1@t1", "2/missing-pod@t2", "0/", "-1", "shard-0", "9999"]), hostile_text()
    )
    paused = st.sampled_from(["true", "TRUE", "false", "yes"]).map(lambda v: {PAUSED_ANNOTATION: v})
    requests = st.one_of(  # the day-2 requests a ValkeyCluster reads (api/switchover.py)
        switchover.map(lambda v: {SWITCHOVER_ANNOTATION: v}),
        st.one_of(st.just("2026-12-03T13:00:00Z"), hostile_text()).map(
            lambda v: {RESTARTED_AT_ANNOTATION: v}
        ),
    )
    annotations: st.SearchStrategy[dict[str, str]] = (
        st.one_of(st.just({}), paused, requests) if namespaced else st.one_of(st.just({}), paused)
    )

    def build(name: str, notes: dict[str, str]) -> Obj:
        meta: Obj = {"name": name, "labels": {RUN_LABEL: pool.run}}
        if namespaced:
            meta["namespace"] = pool.namespace
        if notes:
            meta["annotations"] = notes
        return meta

    return st.builds(build, name, annotations)


def write(pool: Pool) -> st.SearchStrategy[Write]:
    kinds: list[tuple[Resource, tuple[str, ...], Draw]] = [
        (VALKEY_IMAGES, pool.images, image_spec()),
        (VALKEY_CONFIGS, pool.configs, config_spec(pool)),
        (VALKEY_ROLES, pool.roles, role_spec()),
        (VALKEY_CLUSTERS, pool.clusters, cluster_spec(pool)),
    ]
    return choose(
        *(
            st.builds(
                lambda meta, spec, resource=resource: Write(
                    resource,
                    {
                        "apiVersion": resource.api_version,
                        "kind": resource.kind,
                        "metadata": meta,
                        "spec": spec,
                    },
                ),
                metadata(pool, names, resource.namespaced),
                sometimes(spec, wrong_type()),
            )
            for resource, names, spec in kinds
        )
    )


def delete(pool: Pool) -> st.SearchStrategy[Delete]:
    targets = [
        *((VALKEY_IMAGES, name) for name in pool.images),
        *((VALKEY_CONFIGS, name) for name in pool.configs),
        *((VALKEY_ROLES, name) for name in pool.roles),
        *((VALKEY_CLUSTERS, name) for name in pool.clusters),
    ]
    return st.builds(
        lambda target, propagation: Delete(
            target[0], target[1], pool.namespace if target[0].namespaced else None, propagation
        ),
        st.sampled_from(targets),
        st.sampled_from(PROPAGATIONS),
    )


def batch(pool: Pool) -> st.SearchStrategy[list[Op]]:
    """One example: a few writes and deletes, sent back to back (deletes land mid-flight)."""
    writes, deletes = write(pool), delete(pool)
    one_in_six = st.sampled_from((False, False, True, False, False, False))
    op: st.SearchStrategy[Op] = one_in_six.flatmap(lambda delete: deletes if delete else writes)
    return st.lists(op, min_size=1, max_size=5)
