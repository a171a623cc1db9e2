"""The While loop compiles the same graphs whatever the number of steps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from suites.accumulation.compilation import measure

STEPS = (2, 4, 8, 16)


def test_compiled_graphs_do_not_grow_with_steps(device: Any, record_property: Callable[[str, object], None]) -> None:
    costs = measure(device, STEPS)
    for c in costs:
        record_property(
            f"steps_{c.steps}",
            {
                "while": [c.while_compiles, c.while_hlo_lines],
                "ordinary": [c.ordinary_compiles, c.ordinary_hlo_lines],
            },
        )
    while_counts = {c.while_compiles for c in costs}
    while_sizes = {c.while_hlo_lines for c in costs}
    assert len(while_counts) == 1, f"While-loop compiles vary with steps: {costs}"
    assert len(while_sizes) == 1, f"While-loop graph size varies with steps: {costs}"
    assert all(c.while_compiles > 0 for c in costs), "nothing was compiled: the metric is not read"
    # the measurement means something: the unrolled loop's graph grows with the steps
    sizes = [c.ordinary_hlo_lines for c in costs]
    assert sizes == sorted(sizes) and sizes[-1] > 4 * sizes[0], f"ordinary loop sizes {sizes}"
