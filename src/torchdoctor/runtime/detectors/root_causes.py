"""Root causes of a loss that cannot train, seen in its autograd graph (TD308).

A classification loss over a single class: ``cross_entropy`` (or ``nll_loss`` after
``log_softmax``) on logits whose class dimension has size 1. ``log_softmax`` of one value
is exactly 0, so the loss is exactly 0 (or a constant) and every gradient is exactly zero:
the model never changes. The graph is read before ``backward()`` on a few calls per
place, so the cost is a handful of attribute reads.

Findings of this module come first in a run's report (they are emitted during the run),
so detectors that see its symptoms (zero gradients, parameters that never change, a
constant loss) leave the explanation to it.
"""

from __future__ import annotations

from typing import Any

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import BackwardEvent, CallSite, RuntimeDetector

__all__ = ["SingleLogitCrossEntropy", "single_logit_shape"]

_CHECKS_PER_SITE = 4
_GRAPH_NODES = 8  # autograd nodes read from the loss down


def single_logit_shape(loss: Any) -> tuple[int, ...] | None:
    """The shape of the scores when ``loss`` is a log-softmax over a dimension of size 1
    fed to NLL (what ``cross_entropy`` computes), else ``None``. Needs the graph before
    ``backward()`` frees its saved tensors."""
    frontier = [getattr(loss, "grad_fn", None)]
    seen = 0
    while frontier and seen < _GRAPH_NODES:
        node = frontier.pop(0)
        if node is None:
            continue
        seen += 1
        if node.name() == "LogSoftmaxBackward0":
            try:
                result, dim = node._saved_result, int(node._saved_dim)
            except (AttributeError, RuntimeError):  # freed, or another torch's layout
                return None
            if dim >= 2**63:  # a negative dim, saved as an unsigned 64-bit integer
                dim -= 2**64
            shape = tuple(result.shape)
            if not shape or not -len(shape) <= dim < len(shape):
                return None
            return shape if shape[dim] == 1 else None
        frontier.extend(next_node for next_node, _ in node.next_functions)
    return None


@detector("TD308", depth=Depth.RUN)
class SingleLogitCrossEntropy(RuntimeDetector):
    """Flags a cross-entropy loss computed over one class."""

    def __init__(self) -> None:
        self._checked: dict[CallSite, int] = {}

    def on_backward(self, event: BackwardEvent) -> None:
        checked = self._checked.get(event.site, 0)
        if checked >= _CHECKS_PER_SITE:
            return
        self._checked[event.site] = checked + 1
        shape = single_logit_shape(event.loss)
        if shape is None:
            return
        self._checked[event.site] = _CHECKS_PER_SITE  # found: no need to look again
        self.emit(finding(
            "TD308",
            f"The loss of `backward()` at {event.site} is a cross-entropy over a single "
            f"class: the scores have shape {list(shape)}, one logit per example. "
            "`log_softmax` of one value is exactly 0, so the loss is constant and every "
            "gradient is exactly zero: the model never learns",
            event.site.location(object="loss"), Depth.RUN,
            fix_hint="For a yes/no target, use `BCEWithLogitsLoss` on the single logit "
                     "(`target.float()`); for C classes give the last layer C outputs.",
            evidence={"scores_shape": list(shape), "backward_call": event.index},
        ))
