"""decide(): the pure part of one reconcile pass of an Active 3x1 cluster, timed in process.

The facts come from the unit tests' simulator (tests/unit/controllers/cluster), brought to Active
by decide() itself; then decide() and, for comparison, plan() alone (the topology planner inside
it) are timed on the same facts, and so are the status conversions around decide: `parse` reads
the stored status into the ValkeyClusterStatus model decide takes (the reconciler gets it parsed
with the cluster, and parses only its own write while the cache lags it), `render` turns the
decided model into the dict the reconciler writes (once per pass). No API server, no Valkey: what
this measures is the decision's own cost per pass, which every reconcile pays on top of observing
and acting.

    python bench/decide_pass.py [--passes 500] [--shards 3] [--replicas 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "controllers" / "cluster"))

import decide_harness  # type: ignore[import-not-found]

from controllers.cluster.decision.decide import decide
from controllers.cluster.decision.plan import plan
from valkey_operator.api.cluster import ValkeyClusterStatus


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--passes", type=int, default=500)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=1)
    args = parser.parse_args()
    world = decide_harness.run(decide_harness.world(args.shards, args.replicas), passes=120)
    assert world.state == "Active", world.status.get("message")
    facts = decide_harness.gather(world)
    now = facts.now
    decision = decide(facts, now)
    assert decision.plan is not None
    desired, context = decision.plan.view.desired, decision.plan.view.context
    rows = []
    stored = world.status
    for name, call in (
        ("decide", lambda: decide(facts, now)),
        ("plan", lambda: plan(facts.observation, desired, context)),
        ("parse", lambda: ValkeyClusterStatus.from_dict(stored)),
        ("render", decision.status.to_dict),
    ):
        samples = []
        for _ in range(args.passes):
            started = time.perf_counter()
            call()
            samples.append((time.perf_counter() - started) * 1000)
        rows.append((name, statistics.median(samples), sorted(samples)[int(len(samples) * 0.99) - 1]))
    print(f"{args.shards}x{args.replicas} Active, {args.passes} passes each (ms):")
    for name, median, p99 in rows:
        print(f"  {name:<7} median {median:.2f}  p99 {p99:.2f}")


if __name__ == "__main__":
    main()
