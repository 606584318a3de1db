"""Targets that carry a gradient into the network being trained (TD222 at run time).

A regression or distillation target is a fixed value: a bootstrap target ``r + γ·max
Q(s')`` computed by the Q-network itself, or a target rebuilt from the model's own
output, must be computed under ``torch.no_grad()`` (or detached). When it is not, the
target argument of ``mse_loss`` / ``smooth_l1_loss`` / ``huber_loss`` / binary
cross-entropy has a graph, and ``backward()`` also moves the target toward the
prediction (residual-gradient learning instead of TD learning: a DQN that learns Q
values three times as wrong).

The invariant is read on the loss call in the graph (:mod:`.loss_nodes`): its target
argument has a graph that reaches parameters an optimizer steps.

Policy for losses that compare two predictions on purpose: a consistency loss
(``mse_loss(model(x1), model(x2))``, two softmax outputs) sends gradients through both
sides by design. When both arguments come out of the same kind of operation (the same
last node below reshapes and selections), the call is taken as such a comparison and
left alone. A regression loss is symmetric: when its first argument has no graph (a
fixed target written first, ``mse_loss(td_target, q)``), the second is the prediction and
nothing is wrong. A target built by arithmetic on a prediction (a sum with rewards, a scaled
or maximised output) is not. A target reaching only parameters that no optimizer holds
(a teacher or target network that is not detached) is the model-level TD222 check's
(:class:`~torchdoctor.runtime.detectors.root_causes.TargetNetworkGetsGradients`).

Cost: on the first 8 backward passes of each place and then one in 50, a walk of at
most 256 autograd nodes under the target argument; nothing is read from the device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchdoctor.findings import Depth, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import BackwardEvent, CallSite, RuntimeDetector
from torchdoctor.runtime.detectors.loss_nodes import (
    Cadence,
    LossFamily,
    below_shape_ops,
    loss_calls,
    reached_leaves,
)

__all__ = ["TargetCarriesGradient"]

_TARGET_FAMILIES = frozenset({LossFamily.REGRESSION, LossFamily.BCE, LossFamily.BCE_WITH_LOGITS})
_LEAF_BUDGET = 256  # autograd nodes read under a target argument


@dataclass(slots=True)
class _Target:
    """What one loss call's target argument reached, over its checked calls."""

    name: str
    made_by: str
    leaves: dict[int, str] = field(default_factory=dict)  # id(parameter) -> its name


@detector("TD222", depth=Depth.RUN)
class TargetCarriesGradient(RuntimeDetector):
    """Flags a loss whose target argument carries a gradient into trained parameters."""

    def __init__(self) -> None:
        self._cadence = Cadence()
        self._targets: dict[tuple[CallSite, str], _Target] = {}

    def on_backward(self, event: BackwardEvent) -> None:
        if not self._cadence.due(event.site):
            return
        for call in loss_calls(event.loss):
            if call.family not in _TARGET_FAMILIES:
                continue
            target = call.argument_node(1)
            if target is None:
                continue
            if call.family is LossFamily.REGRESSION and call.argument_node(0) is None:
                continue  # a squared or absolute error with its arguments swapped (fixed first)
            made_by = below_shape_ops(target)
            prediction = below_shape_ops(call.argument_node(0))
            if (
                prediction is not None
                and made_by is not None
                and (prediction.name() == made_by.name())
            ):
                continue  # two predictions of one kind: a consistency loss, on purpose
            seen = self._targets.setdefault(
                (event.site, call.name), _Target(call.name, made_by.name() if made_by else "?")
            )
            for parameter in reached_leaves(target, _LEAF_BUDGET):
                if id(parameter) not in seen.leaves:
                    name = (
                        self.monitor.param_name(parameter) or f"a {tuple(parameter.shape)} tensor"
                    )
                    seen.leaves[id(parameter)] = name

    def on_finish(self, report: Report) -> None:
        held = {id(p) for info in self.monitor.optimizers for p in info.params}
        for (site, _), target in self._targets.items():
            trained = [name for key, name in target.leaves.items() if key in held]
            if trained:
                self._emit(site, target, trained)

    def _emit(self, site: CallSite, target: _Target, trained: list[str]) -> None:
        shown = ", ".join(f"`{n}`" for n in trained[:4]) + (" ..." if len(trained) > 4 else "")
        self.emit(
            finding(
                "TD222",
                f"The target of `{target.name}` (backward at {site}) carries a gradient into "
                f"{len(trained)} parameter(s) that an optimizer trains ({shown}): it is "
                "computed from the network being trained (a bootstrap target such as "
                "r + γ·max Q(s'), or the model's own output rescaled) with its graph, so "
                "every step also pulls the target toward the prediction instead of "
                "holding it fixed",
                site.location(object=target.name),
                Depth.RUN,
                fix_hint="Compute the target under `torch.no_grad()` (or `.detach()` it) "
                "before the loss.",
                evidence={
                    "loss": target.name,
                    "target_made_by": target.made_by,
                    "trained_parameters": trained[:20],
                },
            )
        )
