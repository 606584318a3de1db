"""DDP's own errors, said in the user's terms (details for the exception explainer).

DDP reports parameters that received no gradient by their *index* among the parameters
it reduces (``Parameter indices which did not receive grad for rank 0: 4 5``). The
explainer knows the run's models; the trained model turns the indices into names.
No torch import: the model objects are only asked for their attributes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from torchdoctor.runtime.exceptions.facts import Detail, ErrorFacts

__all__ = ["unused_parameters"]

_INDICES = re.compile(r"Parameter indices which did not receive grad for rank (\d+):\s*([\d ]+)")
_SHOWN = 5


def unused_parameters(facts: ErrorFacts) -> Detail | None:
    """``Expected to have finished reduction in the prior iteration ...``: name the
    parameters that got no gradient; ``None`` when the message lists no indices."""
    match = _INDICES.search(facts.text)
    if match is None:
        return None
    rank = int(match.group(1))
    indices = [int(i) for i in match.group(2).split()]
    names = _names(facts.models, indices)
    listed = ", ".join(f"`{n}`" for n in names[:_SHOWN])
    if len(names) > _SHOWN:
        listed += f" and {len(names) - _SHOWN} more"
    which = listed or f"the parameters at indices {' '.join(map(str, indices))}"
    summary = (
        f"DDP stopped: {which} received no gradient in the previous step on rank "
        f"{rank}, and DDP was built without `find_unused_parameters=True`, so its "
        "gradient reduction waited for them and the next forward found it unfinished"
    )
    fixes = (
        f"Make {which} take part in the loss, or freeze them (`requires_grad_(False)`) "
        "before wrapping the model in DDP.",
        "If they are skipped on purpose on some steps, pass "
        "`find_unused_parameters=True` to DDP (it costs a graph traversal per step).",
    )
    return Detail(summary, fixes, {"rank": rank, "parameter_indices": indices, "parameters": names})


def _names(models: Sequence[Any], indices: list[int]) -> list[str]:
    """The names of the reduced parameters at ``indices`` (the model's trainable
    parameters in registration order, as DDP lists them), or ``[]`` when no known model
    has that many. The explainer passes the models with their DDP wrapper looked through.
    """
    if not indices:
        return []
    for model in models:
        inner = model.module if hasattr(model, "find_unused_parameters") else model
        named = getattr(inner, "named_parameters", None)
        if named is None:
            continue
        names = [n for n, p in named() if p.requires_grad]
        if max(indices) < len(names):
            return [names[i] for i in indices]
    return []
