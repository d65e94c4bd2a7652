"""What an end-to-end test may ask of the operator under test, whichever runs it: the chart's image
(chart_operator.ChartOperator, the default) or the reconcilers in the test process
(inprocess_operator.Operator, for the few tests that must reach inside)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class RunningOperator(Protocol):
    async def reconciles(self, controller: str) -> int:
        """Passes the named controller finished since the operator was first started."""
        ...

    async def sample(self, name: str, labels: Mapping[str, str]) -> float | None:
        """One sample of the operator's metrics, None when it has none with these labels."""
        ...

    async def stop(self) -> None: ...

    async def start(self) -> None: ...
