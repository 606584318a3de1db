"""Loss domains at run time: each loss call is judged on the values it received.

Invariants every correct call keeps, whatever helper, class or callback built its
arguments (the calls are found in the loss's graph, :mod:`.loss_nodes`):

* ``nll_loss`` and ``ctc_loss`` take log-probabilities, which are never above 0: values
  above it are raw scores or probabilities (TD305);
* ``cross_entropy`` takes scores: a softmax output (rows in [0, 1] summing to 1) is
  probabilities, and the loss applies log_softmax to them again (TD301);
* ``binary_cross_entropy_with_logits`` takes logits: inputs made by a sigmoid (through
  reshapes and clamps), or that all lie in (0, 1] over many calls of a run while spanning
  half of it, are probabilities (TD303);
* binary cross-entropy targets lie in [0, 1], and class weights and ``pos_weight`` are
  not negative (TD309);
* a loss bounded below by 0 never goes below it: when the whole loss is one such call,
  a negative value names the domain it left (TD305 for log-probabilities, TD309 for
  targets).

Cost: a graph walk of at most 32 nodes and a few reductions over at most 4096 values, on the
first 8 backward passes of each place and then one in 50; the numbers are read back
without a synchronisation (:meth:`MonitorView.defer`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torchdoctor.findings import Depth, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    BackwardEvent,
    CallSite,
    LossValue,
    RuntimeDetector,
)
from torchdoctor.runtime.detectors.loss_nodes import (
    Cadence,
    LossCall,
    LossFamily,
    below_shape_ops,
    loss_calls,
)

__all__ = ["LOG_PROB_SLACK", "PROBABILITY_SLACK", "VALUES", "LossDomain", "floating_values"]

VALUES = 4096  # values of an argument read per check (its first ones)
LOG_PROB_SLACK = 1e-2  # a log-probability above this is not one (rounding aside)
PROBABILITY_SLACK = 1e-3
# Without a sigmoid node in the graph (one written by hand, 1 / (1 + exp(-x))), values alone
# decide, and only on strong evidence: logits of a learning model that stay inside [0, 1]
# over many checked calls across the run while spanning at least half of it. A few calls
# are not enough: a fresh discriminator's logits can all be small positive numbers.
SIGMOID_CALLS = 20
SIGMOID_VALUES = 256
SIGMOID_SPREAD = 0.5
_SQUASHING_NODES = frozenset({"SigmoidBackward0", "SoftmaxBackward0"})
_CLAMP_NODES = frozenset({"ClampBackward1", "ClampMinBackward0", "ClampMaxBackward0"})
_WHOLE_LOSS_NODES = frozenset({"MeanBackward0", "MeanBackward1", "SumBackward0", "SumBackward1"})


@dataclass(slots=True)
class _Range:
    """Smallest and largest input values seen at one call, over its checked calls."""

    low: float = float("inf")
    high: float = float("-inf")
    values: int = 0
    calls: int = 0
    squashed: bool = False  # made by a sigmoid or softmax node (through reshapes)


@detector("TD301", "TD303", "TD305", "TD309", depth=Depth.RUN)
class LossDomain(RuntimeDetector):
    """Judges loss arguments (and single-call losses) against their domains."""

    def __init__(self) -> None:
        self._cadence = Cadence()
        self._ranges: dict[tuple[CallSite, str], _Range] = {}
        self._bounded: dict[int, LossCall] = {}  # backward index -> the one call it is
        self._evidence: dict[tuple[str, CallSite], dict[str, float]] = {}

    def on_backward(self, event: BackwardEvent) -> None:
        if not self._cadence.due(event.site):
            return
        calls = loss_calls(event.loss)
        whole = _whole_call(event.loss, calls)
        if whole is not None:  # judged on this very backward pass's value, when read
            self._bounded[event.index] = LossCall(whole.family, whole.name, None)
        for call in calls:
            self._judge(call, event.site)

    def on_losses(self, losses: Sequence[LossValue]) -> None:
        if not self._bounded:
            return  # no pass of these was read at its call
        for loss in losses:
            call = self._bounded.pop(loss.index, None)
            if call is None or not loss.value < -1e-6 * max(1.0, abs(loss.value)):
                continue
            if call.family in (LossFamily.NLL, LossFamily.CTC):
                self._emit_log_probs(loss.site, call.name, None, loss.value)
            elif call.family in (LossFamily.BCE, LossFamily.BCE_WITH_LOGITS):
                self._emit_targets(loss.site, call.name, None, None, loss.value)

    # -- reading the arguments -----------------------------------------------------------

    def _judge(self, call: LossCall, site: CallSite) -> None:
        import torch

        with torch.no_grad():
            self._judge_weights(call, site)
            if call.family in (LossFamily.NLL, LossFamily.CTC):
                self._judge_log_probs(call, site)
            elif call.family is LossFamily.BCE_WITH_LOGITS:
                self._judge_logits(call, site)
            if call.family in (LossFamily.BCE, LossFamily.BCE_WITH_LOGITS):
                target = call.saved("target")
                if floating_values(target):
                    rows = _rows(target).float()
                    self._read([rows.min(), rows.max()], self._targets_read, site, call.name)

    def _judge_weights(self, call: LossCall, site: CallSite) -> None:
        for option in ("weight", "pos_weight"):
            weight = call.saved(option)
            if floating_values(weight):
                self._read([weight.min().float()], self._weight_read, site, call.name, option)

    def _judge_log_probs(self, call: LossCall, site: CallSite) -> None:
        values = call.saved("log_probs" if call.family is LossFamily.CTC else "self")
        made_by = call.argument_node(0)
        if made_by is not None and made_by.name() == "LogSoftmaxBackward0":
            self._judge_class_dim(made_by, call, site)
        below = below_shape_ops(made_by)
        if below is not None and below.name() == "LogSoftmaxBackward0":
            self._judge_softmax_input(below, site)  # cross_entropy: log-probs by construction
            return
        if floating_values(values):
            self._read([_rows(values).max().float()], self._log_probs_read, site, call.name)

    def _judge_class_dim(self, log_softmax: Any, call: LossCall, site: CallSite) -> None:
        """``nll_loss`` reads classes along dim 1 (of an input with a batch dim): a
        log_softmax handed straight to it over another dim (the batch, with ``dim=0``)
        normalises the wrong way, and its rows are no log-probabilities."""
        if call.family is not LossFamily.NLL or ("TD305", site) in self._evidence:
            return
        try:
            dim, rank = int(log_softmax._saved_dim), log_softmax._saved_result.dim()
        except (AttributeError, RuntimeError):
            return
        if dim >= 2**63:  # a negative dim, saved as an unsigned 64-bit integer
            dim -= 2**64
        if rank < 2 or dim % rank == 1:
            return
        self._evidence[("TD305", site)] = {"log_softmax_dim": dim, "input_dims": rank}
        self.emit(
            finding(
                "TD305",
                f"`{call.name}` (backward at {site}) receives a `log_softmax` taken over dim "
                f"{dim} of its {rank}-D input, but it reads the classes along dim 1: the "
                "values are normalised across "
                + ("the examples of the batch" if dim % rank == 0 else f"dim {dim}")
                + ", not across the classes, so they are no log-probabilities of the "
                "classes and each example's loss depends on the rest of the batch",
                site.location(object=call.name),
                Depth.RUN,
                fix_hint="Take `log_softmax` over the class dimension: `dim=1` "
                "(`dim=-1` for a 2-D input of shape (batch, classes)).",
                evidence={"log_softmax_dim": dim, "input_dims": rank},
            )
        )

    def _judge_softmax_input(self, log_softmax: Any, site: CallSite) -> None:
        producer = below_shape_ops(log_softmax.next_functions[0][0])
        if producer is None or producer.name() != "SoftmaxBackward0":
            return
        try:
            probabilities, dim = producer._saved_result, int(producer._saved_dim)
        except (AttributeError, RuntimeError):
            return
        if dim >= 2**63:  # a negative dim, saved as an unsigned 64-bit integer
            dim -= 2**64
        rows = _whole_rows(probabilities, dim).float()
        sums = (rows.sum(-1) - 1).abs().max()
        self._read([rows.min().float(), rows.max().float(), sums], self._softmax_read, site)

    def _judge_logits(self, call: LossCall, site: CallSite) -> None:
        logits = call.saved("self")
        if not floating_values(logits):
            return
        producer = below_shape_ops(call.argument_node(0))
        for _ in range(2):  # a clamp after the sigmoid (for log's sake) keeps it probabilities
            if producer is None or producer.name() not in _CLAMP_NODES:
                break
            producer = below_shape_ops(producer.next_functions[0][0])
        if producer is not None and producer.name() in _SQUASHING_NODES:
            self._ranges.setdefault((site, "logits"), _Range()).squashed = True
        rows = _rows(logits).float()
        size = float(rows.numel())
        self._read([rows.min(), rows.max(), rows.new_tensor(size)], self._logits_read, site)

    def _read(self, parts: list[Any], callback: Any, *args: Any) -> None:
        import torch

        device = parts[0].device
        vector = torch.stack([p.reshape(()).float().to(device) for p in parts])
        self.monitor.defer(vector, functools.partial(callback, *args))

    # -- verdicts ------------------------------------------------------------------------

    def _log_probs_read(self, site: CallSite, name: str, values: list[float]) -> None:
        if values[0] > LOG_PROB_SLACK:
            self._emit_log_probs(site, name, values[0], None)

    def _softmax_read(self, site: CallSite, values: list[float]) -> None:
        low, high, off = values
        if low >= 0 and high <= 1 + PROBABILITY_SLACK and off <= PROBABILITY_SLACK:
            self.emit(
                finding(
                    "TD301",
                    f"`cross_entropy` (backward at {site}) receives probabilities: its input "
                    "is a softmax output (every row in [0, 1], summing to 1), and "
                    "cross_entropy applies log_softmax to it again, so the predicted "
                    "distribution can never be confident and the gradients shrink",
                    site.location(object="cross_entropy"),
                    Depth.RUN,
                    fix_hint="Pass the raw scores (logits) to the loss; apply softmax only "
                    "to make predictions.",
                    evidence={"min": low, "max": high, "row_sum_error": off},
                )
            )

    def _logits_read(self, site: CallSite, values: list[float]) -> None:
        seen = self._ranges.setdefault((site, "logits"), _Range())
        seen.low, seen.high = min(seen.low, values[0]), max(seen.high, values[1])
        seen.values += int(values[2])
        seen.calls += 1

    def on_finish(self, report: Report) -> None:
        # Judged on every checked call of the run, not the first ones: a zero-initialised
        # head gives logits of exactly 0 at first, and logits leave [0, 1] as it learns.
        for (site, _), seen in self._ranges.items():
            # A sigmoid's output is never exactly 0; logits of exactly 0 are a fresh
            # zero-initialised head. Without a sigmoid node in sight, values decide.
            in_unit = 0 <= seen.low <= seen.high <= 1
            by_values = (
                0 < seen.low < seen.high
                and seen.high - seen.low >= SIGMOID_SPREAD
                and seen.calls >= SIGMOID_CALLS
                and seen.values >= SIGMOID_VALUES
            )
            if in_unit and (seen.squashed or by_values):
                self._emit_probabilities(site, seen)

    def _emit_probabilities(self, site: CallSite, seen: _Range) -> None:
        self.emit(
            finding(
                "TD303",
                f"`binary_cross_entropy_with_logits` (backward at {site}) receives "
                f"probabilities, not logits: all {seen.values} input values of "
                f"{seen.calls} checked calls lie in [{seen.low:.3g}, {seen.high:.3g}]. It "
                "applies sigmoid itself, so predictions are squeezed into (0.5, 0.73) "
                "and the loss cannot fall below 0.31",
                site.location(object="binary_cross_entropy_with_logits"),
                Depth.RUN,
                fix_hint="Remove the sigmoid at the end of the model's forward (return "
                "logits); apply sigmoid only to make predictions.",
                evidence={
                    "min": seen.low,
                    "max": seen.high,
                    "values": seen.values,
                    "calls": seen.calls,
                },
            )
        )

    def _targets_read(self, site: CallSite, name: str, values: list[float]) -> None:
        if values[0] < -PROBABILITY_SLACK or values[1] > 1 + PROBABILITY_SLACK:
            self._emit_targets(site, name, values[0], values[1], None)

    def _weight_read(self, site: CallSite, name: str, option: str, values: list[float]) -> None:
        if values[0] >= 0:
            return
        kind = "`pos_weight`" if option == "pos_weight" else "class weights"
        self.emit(
            finding(
                "TD309",
                f"`{name}` (backward at {site}) has {kind} as low as {values[0]:.4g}: a "
                "negative weight turns the loss of those examples into a reward for being "
                "wrong, and training pushes them away from their labels",
                site.location(object=name),
                Depth.RUN,
                fix_hint="Make every weight positive (inverse class frequencies, "
                "`negatives / positives` for pos_weight).",
                evidence={"option": option, "min": values[0]},
            )
        )

    def _emit_log_probs(
        self, site: CallSite, name: str, highest: float | None, loss: float | None
    ) -> None:
        seen = self._evidence.setdefault(("TD305", site), {})
        if highest is not None:
            seen["max_input"] = max(highest, seen.get("max_input", highest))
        if loss is not None:
            seen["lowest_loss"] = min(loss, seen.get("lowest_loss", loss))
        parts = []
        if "max_input" in seen:
            parts.append(f"receives values up to {seen['max_input']:.4g}")
        if "lowest_loss" in seen:
            parts.append(f"returned {seen['lowest_loss']:.4g}, below its bound of 0")
        self.emit(
            finding(
                "TD305",
                f"`{name}` (backward at {site}) {' and '.join(parts)}: it expects "
                "log-probabilities, which are never above 0, and is given raw scores or "
                "probabilities (no `log_softmax`), so the loss is no likelihood and falls "
                "without the model learning",
                site.location(object=name),
                Depth.RUN,
                fix_hint="Apply `log_softmax` to the scores before the loss, or pass the "
                "raw scores to `cross_entropy` instead.",
                evidence=dict(seen),
            )
        )

    def _emit_targets(
        self, site: CallSite, name: str, low: float | None, high: float | None, loss: float | None
    ) -> None:
        seen = self._evidence.setdefault(("TD309", site), {})
        if low is not None and high is not None:
            seen["min_target"] = min(low, seen.get("min_target", low))
            seen["max_target"] = max(high, seen.get("max_target", high))
        if loss is not None:
            seen["lowest_loss"] = min(loss, seen.get("lowest_loss", loss))
        parts = []
        if "min_target" in seen:
            parts.append(
                f"receives targets from {seen['min_target']:.4g} to {seen['max_target']:.4g}"
            )
        if "lowest_loss" in seen:
            parts.append(f"returned {seen['lowest_loss']:.4g}, below its bound of 0")
        self.emit(
            finding(
                "TD309",
                f"`{name}` (backward at {site}) {' and '.join(parts)}: binary cross-entropy "
                "targets must lie in [0, 1] (labels such as -1/1 or 0/255 were not mapped), "
                "so the loss has no minimum where the predictions are right",
                site.location(object=name),
                Depth.RUN,
                fix_hint="Map the labels to [0, 1] before the loss (`(y + 1) / 2` for -1/1, "
                "`y / 255` for 0/255).",
                evidence=dict(seen),
            )
        )


def _whole_call(loss: Any, calls: list[LossCall]) -> LossCall | None:
    """The call when ``loss`` is exactly one loss call (or its mean or sum)."""
    if len(calls) != 1:
        return None
    root = getattr(loss, "grad_fn", None)
    if root is calls[0].node:
        return calls[0]
    if root is not None and root.name() in _WHOLE_LOSS_NODES:
        edges = root.next_functions
        if len(edges) == 1 and edges[0][0] is calls[0].node:
            return calls[0]
    return None


def floating_values(tensor: Any) -> bool:
    """Whether ``tensor`` holds floating values to read (not empty, not on ``meta``)."""
    return (
        tensor is not None
        and hasattr(tensor, "is_floating_point")
        and tensor.is_floating_point()
        and tensor.numel() > 0
        and tensor.device.type != "meta"
    )


def _rows(tensor: Any) -> Any:
    """The first :data:`VALUES` values of a tensor, detached and flattened."""
    return tensor.detach().reshape(-1)[:VALUES]


def _whole_rows(tensor: Any, dim: int) -> Any:
    """The first rows of ``tensor`` along ``dim`` (each row whole), about :data:`VALUES`
    values in all, at least one row."""
    tensor = tensor.detach().movedim(dim, -1)
    length = max(1, tensor.shape[-1])
    return tensor.reshape(-1, length)[: max(1, VALUES // length)]
