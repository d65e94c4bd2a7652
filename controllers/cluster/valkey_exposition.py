"""Pure: the redis_* samples of every node as Prometheus text (format 0.0.4), rendered once per read.

Why not prometheus_client's collector: at 100 nodes the series are ~9,300 samples, and
generate_latest formats each one on every scrape (0.15 s of CPU per scrape measured by
bench/valkey_metrics.py). The samples only change when the nodes are read again, so the exporter
renders them here once per read, with each node's labels formatted once, and every scrape until the
next read appends the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from controllers.cluster.valkey_series import Sample, help_of

NODE_LABELS = ("namespace", "cluster", "shard", "pod")

NodeSamples = tuple[tuple[str, ...], Sequence[Sample]]
"""A node's label values (NODE_LABELS, in order) and its samples."""


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def render(nodes: Iterable[NodeSamples]) -> bytes:
    """Every family once (HELP, TYPE, then its samples from every node), in first-seen order."""
    lines: dict[str, list[str]] = {}
    kinds: dict[str, str] = {}
    for node_labels, samples in nodes:
        prefix = ",".join(
            f'{name}="{escape(value)}"' for name, value in zip(NODE_LABELS, node_labels, strict=True)
        )
        for sample in samples:
            family = lines.get(sample.name)
            if family is None:
                family = lines[sample.name] = []
                kinds[sample.name] = sample.kind
            own = "".join(f',{name}="{escape(value)}"' for name, value in sample.labels)
            family.append(f"{sample.name}{{{prefix}{own}}} {number(sample.value)}\n")
    out = []
    for name, family in lines.items():
        out.append(f"# HELP {name} {help_of(name)}\n# TYPE {name} {kinds[name]}\n")
        out.extend(family)
    return "".join(out).encode()
