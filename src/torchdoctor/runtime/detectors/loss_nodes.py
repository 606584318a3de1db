"""The loss calls inside a loss's autograd graph, read before ``backward()`` frees it.

Whatever helper, class or callback computed a loss, ``backward()`` receives its graph,
and each call of a known loss function left one node there holding the very tensors it
was given (``NllLossBackward0._saved_self`` is the input, ``_saved_target`` the target).
:func:`loss_calls` finds those nodes near the top of the graph, so runtime invariants
are judged on the values at the call, at the cost of a few attribute reads.

Functions that decompose into plain arithmetic (``l1_loss``, ``kl_div``, cross-entropy
with probability targets) leave no node of their own, and are not seen here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHECKS_FIRST",
    "CHECK_EVERY",
    "Cadence",
    "LossCall",
    "compiling",
    "LossFamily",
    "below_shape_ops",
    "loss_calls",
    "reached_leaves",
]

CHECKS_FIRST = 8  # backward passes of each place checked from the start
CHECK_EVERY = 50  # then one in this many
_GRAPH_NODES = 32  # autograd nodes read from the loss down, at most


class LossFamily(enum.Enum):
    """Loss functions by what their arguments must be."""

    NLL = "nll_loss"  # log-probabilities and class indices (cross_entropy's second half)
    BCE = "binary_cross_entropy"  # probabilities and targets in [0, 1]
    BCE_WITH_LOGITS = "binary_cross_entropy_with_logits"  # logits and targets in [0, 1]
    CTC = "ctc_loss"  # log-probabilities over the classes
    REGRESSION = "regression"  # mse, smooth L1, Huber: a prediction and its target


_NODES = {
    "NllLossBackward0": LossFamily.NLL,
    "NllLoss2DBackward0": LossFamily.NLL,
    "BinaryCrossEntropyBackward0": LossFamily.BCE,
    "BinaryCrossEntropyWithLogitsBackward0": LossFamily.BCE_WITH_LOGITS,
    "CtcLossBackward0": LossFamily.CTC,
    "MseLossBackward0": LossFamily.REGRESSION,
    "SmoothL1LossBackward0": LossFamily.REGRESSION,
    "HuberLossBackward0": LossFamily.REGRESSION,
}
_REGRESSION_NAMES = {
    "MseLossBackward0": "mse_loss",
    "SmoothL1LossBackward0": "smooth_l1_loss",
    "HuberLossBackward0": "huber_loss",
}

# Nodes that only move, select or copy values: what is below them is what the loss got.
_SHAPE_OPS = frozenset(
    {
        "ViewBackward0",
        "UnsafeViewBackward0",
        "ReshapeAliasBackward0",
        "PermuteBackward0",
        "TransposeBackward0",
        "TransposeBackward1",
        "SqueezeBackward0",
        "SqueezeBackward1",
        "SqueezeBackward2",
        "SqueezeBackward3",
        "UnsqueezeBackward0",
        "CloneBackward0",
        "SliceBackward0",
        "SelectBackward0",
        "IndexBackward0",
        "ToCopyBackward0",
        "AliasBackward0",
        "ExpandBackward0",
    }
)


@dataclass(frozen=True, slots=True)
class LossCall:
    """One call of a known loss function, found in a graph.

    Attributes:
        family: what its arguments must be.
        name: the functional's name (``nll_loss``, ``mse_loss``, ...).
        node: its autograd node (lent: read it inside the hook only).
    """

    family: LossFamily
    name: str
    node: Any

    def saved(self, attribute: str) -> Any:
        """A tensor the call saved (``self``, ``target``, ``weight``...), or ``None``."""
        try:
            return getattr(self.node, f"_saved_{attribute}")
        except (AttributeError, RuntimeError):  # not saved by this torch, or freed
            return None

    def argument_node(self, position: int) -> Any:
        """The node that made argument ``position`` (0 input, 1 target), or ``None``."""
        edges = self.node.next_functions
        return edges[position][0] if position < len(edges) else None


class Cadence:
    """Which backward passes of each place a loss-graph check reads: the first
    ``CHECKS_FIRST``, then one in ``CHECK_EVERY``; none while torch.compile traces."""

    __slots__ = ("_count", "_last", "_seen")

    def __init__(self) -> None:
        self._seen: dict[Any, int] = {}
        # The place of the last call and its count, kept out of _seen while the same place
        # comes again (most loops have one): no hashing of the place at every pass.
        self._last: Any = None
        self._count = 0

    def due(self, site: Any) -> bool:
        if site is self._last:
            count = self._count
        else:
            if self._last is not None:
                self._seen[self._last] = self._count
            count = self._seen.get(site, 0)
            self._last = site
        self._count = count + 1
        # The cheap test first: compiling() is a call into torch.
        return (count < CHECKS_FIRST or count % CHECK_EVERY == 0) and not compiling()


def compiling() -> bool:
    """Whether torch.compile is tracing: graph walks and wrappers then stay out of the way
    (reading autograd nodes would break the user's graph)."""
    import torch

    check = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(check()) if check is not None else False


def loss_calls(loss: Any) -> list[LossCall]:
    """The known loss calls near the top of ``loss``'s graph (a sum of several losses
    gives several), in breadth-first order. Their inputs are not searched further."""
    found: list[LossCall] = []
    frontier = [getattr(loss, "grad_fn", None)]
    seen: set[int] = set()
    while frontier and len(seen) < _GRAPH_NODES:
        node = frontier.pop(0)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        name = node.name()
        family = _NODES.get(name)
        if family is not None:
            found.append(LossCall(family, _REGRESSION_NAMES.get(name, family.value), node))
            continue
        frontier.extend(next_node for next_node, _ in node.next_functions)
    return found


def below_shape_ops(node: Any) -> Any:
    """The first node under ``node`` that does more than reshape or select values."""
    for _ in range(16):
        if node is None or node.name() not in _SHAPE_OPS or not node.next_functions:
            return node
        node = node.next_functions[0][0]
    return node


def reached_leaves(node: Any, budget: int = 256) -> list[Any]:
    """The leaf tensors (parameters and the like) whose gradients flow through ``node``,
    within ``budget`` autograd nodes."""
    found: list[Any] = []
    frontier = [node]
    seen: set[int] = set()
    while frontier and len(seen) < budget:
        current = frontier.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        variable = getattr(current, "variable", None)  # AccumulateGrad
        if variable is not None:
            found.append(variable)
        frontier.extend(next_node for next_node, _ in current.next_functions)
    return found
