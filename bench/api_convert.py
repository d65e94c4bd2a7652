"""Dict conversion of a realistic ValkeyCluster: the hand-written converters vs the derived ones.

The reconciler parses every ValkeyCluster it reads (from_dict) and renders every
status it writes (to_dict), so this is the API models' share of the reconcile
path. The hand-written code is loaded from git (commit BASE, before the
converters were derived from the models) into a private package beside the
current one; both convert the same document in one process, alternating, and
the script prints the medians and the ratios. With cattrs importable (for
example `pip install --target /tmp/cattrs cattrs` and `--path /tmp/cattrs`) it
also times a cattrs converter configured for the same rules.

    python bench/api_convert.py [--rounds 7] [--number 2000] [--base f8097b9] [--path DIR]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import statistics
import subprocess
import sys
import tempfile
import timeit
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BASE = "f8097b9"
OLD_MODULES = ("resources", "meta", "image", "config", "role", "cluster")


def load_old(base: str, into: Path) -> types.ModuleType:
    """valkey_operator/api/cluster.py as of `base`, importable as old_api.cluster."""
    package = into / "old_api"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in OLD_MODULES:
        text = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{base}:valkey_operator/api/{name}.py"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (package / f"{name}.py").write_text(text.replace("valkey_operator.api.", "old_api."))
    sys.path.insert(0, str(into))
    return importlib.import_module("old_api.cluster")


def condition(type_: str, reason: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": f"{type_}: {reason}",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 7,
    }


def document(shards: int = 3, replicas: int = 1) -> dict[str, Any]:
    """A 3x1 TLS cluster with four ACL users, placement, and a status listing every node."""
    users = [
        {
            "username": f"app{index}",
            "passwordHashes": ["a" * 64, "0123456789abcdef" * 4],
            "permissions": [
                {
                    "roleRef": "readwrite",
                    "keys": [
                        {"pattern": f"app{index}:*", "access": "readwrite"},
                        {"pattern": "shared:*", "access": "read"},
                    ],
                    "channels": [f"events{index}:*"],
                },
                {"roleRef": "monitoring"},
            ],
        }
        for index in range(4)
    ]
    nodes = [
        {
            "pod": f"cache-{shard}-{'abcdef'[node]}x9k2",
            "shard": shard,
            "role": "primary" if node == 0 else "replica",
            "nodeId": f"{shard}{node}" * 20,
            "ip": f"10.0.{shard}.{node + 10}",
            "version": "9.0.1",
            **({"slots": f"{shard * 5461}-{shard * 5461 + 5460}"} if node == 0 else {}),
        }
        for shard in range(shards)
        for node in range(1 + replicas)
    ]
    return {
        "apiVersion": "valkey.gomomento.com/v1alpha1",
        "kind": "ValkeyCluster",
        "metadata": {
            "name": "cache",
            "namespace": "payments",
            "uid": "6f1c2d0e-0000-4000-8000-000000000001",
            "generation": 7,
            "resourceVersion": "123456",
            "labels": {"team": "payments", "tier": "cache"},
            "annotations": {"example.com/owner": "payments"},
            "finalizers": ["valkey.gomomento.com/cluster"],
        },
        "spec": {
            "configRef": "standard",
            "shards": shards,
            "replicasPerShard": replicas,
            "acl": users,
            "tls": {"secretRef": "cache-tls"},
            "placement": {
                "zones": ["zone-a", "zone-b", "zone-c"],
                "zoneSpread": "required",
                "nodeSelector": {"pool": "valkey"},
                "tolerations": [
                    {"key": "dedicated", "operator": "Equal", "value": "valkey", "effect": "NoSchedule"}
                ],
                "priorityClassName": "high",
            },
            "podAnnotations": {"example.com/scrape": "true"},
        },
        "status": {
            "state": "Updating",
            "message": "rolling shard 1",
            "endpoint": "cache.payments.svc.cluster.local:6379",
            "observedGeneration": 7,
            "shards": shards,
            "readyShards": shards,
            "readyNodes": shards * (1 + replicas),
            "currentImage": "valkey/valkey:9.0.1",
            "configHash": "f" * 64,
            "nodes": nodes,
            "rollout": {
                "shardsUpdated": 1,
                "shards": shards,
                "shard": 1,
                "step": "replicas",
                "startedAt": "2026-01-01T00:00:00Z",
            },
            "maxPrimariesPerNode": 1,
            "tls": {"secretHash": "e" * 64, "changedAt": "2026-01-01T00:00:00Z"},
            "conditions": [
                condition("Ready", "Serving"),
                condition("Progressing", "RollingUpdate"),
                condition("Degraded", "AsExpected"),
            ],
        },
    }


def cattrs_side() -> tuple[Callable[[Any], Any], Callable[[Any], Any]] | None:
    """A cattrs converter with our rules (JSON names, omitempty, tuples), or None without cattrs."""
    try:
        import cattrs  # type: ignore[import-not-found]
        from cattrs.gen import (  # type: ignore[import-not-found]
            make_dict_structure_fn,
            make_dict_unstructure_fn,
            override,
        )
    except ImportError:
        return None
    import attrs

    from valkey_operator.api.cluster import ValkeyCluster
    from valkey_operator.api.fields import json_name

    converter = cattrs.Converter(forbid_extra_keys=False)

    def overrides(cls: type) -> dict[str, Any]:
        return {a.name: override(rename=json_name(a)) for a in attrs.fields(cls)}

    converter.register_structure_hook_factory(
        attrs.has, lambda cls: make_dict_structure_fn(cls, converter, **overrides(cls))
    )
    unstructure = converter.unstructure

    def unstructure_factory(cls: type) -> Callable[[Any], Any]:
        plain = make_dict_unstructure_fn(cls, converter, **overrides(cls))

        resource = getattr(cls, "RESOURCE", None)
        head = {"apiVersion": resource.api_version, "kind": resource.kind} if resource else {}

        def render(value: Any) -> Any:
            body = {k: v for k, v in plain(value).items() if v is not None and v not in ([], {})}
            return {**head, **body} if head else body

        return render

    converter.register_unstructure_hook_factory(attrs.has, unstructure_factory)
    converter.register_unstructure_hook(tuple, lambda value: [unstructure(item) for item in value])
    return (lambda obj: converter.structure(obj, ValkeyCluster)), unstructure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=2000, help="conversions per timing")
    parser.add_argument("--base", default=BASE, help="the git commit of the hand-written converters")
    parser.add_argument("--path", action="append", default=[], help="extra sys.path entry (cattrs)")
    args = parser.parse_args(argv)
    sys.path[:0] = args.path
    from valkey_operator.api.cluster import ValkeyCluster

    obj = document()
    with tempfile.TemporaryDirectory() as tmp:
        old = load_old(args.base, Path(tmp)).ValkeyCluster
        sides: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
            "hand-written": (old.from_dict, old.to_dict),
            "derived": (ValkeyCluster.from_dict, ValkeyCluster.to_dict),
        }
        with_cattrs = cattrs_side()
        if with_cattrs is not None:
            sides["cattrs"] = with_cattrs
        for name, (parse, render) in sides.items():
            assert render(parse(obj)) == obj, f"{name} does not round-trip the document"
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for name, (parse, render) in sides.items():
                model = parse(obj)
                for op, call, arg in (("from_dict", parse, obj), ("to_dict", render, model)):
                    seconds = timeit.timeit(functools.partial(call, arg), number=args.number)
                    times.setdefault((name, op), []).append(seconds / args.number * 1e6)
    print(f"ValkeyCluster 3x1, 4 ACL users, 6 status nodes; median of {args.rounds} x {args.number} (µs)")
    for op in ("from_dict", "to_dict"):
        base = statistics.median(times[("hand-written", op)])
        for name in sides:
            median = statistics.median(times[(name, op)])
            print(f"  {op:9} {name:12} {median:8.1f} µs   {median / base:5.2f}x hand-written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
