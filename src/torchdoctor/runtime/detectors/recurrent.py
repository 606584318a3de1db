"""A sequence-first RNN fed batch-first data (TD109 at run time, whose lint half reads the
``out[:, -1]`` of a sequence-first layer's output).

The invariant: ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` built without ``batch_first=True``
read their input as ``(seq, batch, features)``, so the examples of a step must lie along
dimension 1. When dimension 0 of a 3-D input is the number of examples of the step and
dimension 1 is not, the recurrence runs across the examples of the batch (each one's
hidden state starts from the previous example's) and every "sequence" mixes samples.

The number of examples of a step comes from what the step is judged on: dimension 0 of
the target of the loss call that the next ``backward()`` receives (:mod:`.loss_nodes`),
and the batch size of the ``DataLoader`` the batch came from.

Policy for correct programs that look alike:

* time-major code that transposes (``x.transpose(0, 1)``) puts the examples on dimension
  1: seen as correct, and one such call clears the layer for the run;
* a sequence as long as the batch (both dimensions equal the number of examples), a
  single sequence (dimension 1 of size 1) and a packed sequence are not judged;
* a target laid out like the input (``(seq, batch, ...)`` per-step targets, whose first two
  dimensions are the input's) says nothing about which dimension is the batch: not judged;
* a layer is reported only after 3 judged calls, all of them batch-first.

Cost: only for models holding a sequence-first recurrent layer, a global forward
pre-hook (one dictionary lookup per module call) until each such layer has been judged
``_JUDGED`` times or called ``_SEEN`` times, and for ``_HOOK_STEPS`` optimizer steps at
most; per judged call, the shapes of its input and of the loss's targets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torchdoctor._kernel import raised_by_signal_handler
from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    BackwardEvent,
    BatchEvent,
    CallSite,
    ModelInfo,
    MonitorView,
    RuntimeDetector,
    StepEvent,
)
from torchdoctor.runtime.detectors.loss_nodes import compiling, loss_calls

__all__ = ["SequenceFirstFedBatchFirst"]

_JUDGED = 16  # calls of each layer judged before the hook goes
_SEEN = 64  # calls of each layer recorded before the hook goes, judged or not
_HOOK_STEPS = 200  # optimizer steps after which the hook goes in any case
_MIN_SUSPECT = 3
_PENDING = 16  # calls kept between two backward passes


@dataclass(slots=True)
class _Layer:
    """A sequence-first recurrent layer and what its calls showed."""

    model: ModelInfo
    module: Any
    site: CallSite | None = None
    seen: int = 0  # 3-D calls recorded
    batch_first_calls: int = 0  # examples on dimension 0
    sequence_first_calls: int = 0  # examples on dimension 1
    shape: tuple[int, ...] = ()
    examples: int = 0


@detector("TD109", depth=Depth.RUN)
class SequenceFirstFedBatchFirst(RuntimeDetector):
    """Flags a sequence-first RNN whose input holds the step's examples on dimension 0."""

    def __init__(self) -> None:
        self._layers: dict[int, _Layer] = {}
        self._pending: list[tuple[_Layer, tuple[int, ...]]] = []
        self._loader_batch: int | None = None
        self._handle: Any = None

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        # Nothing to judge until a model holds a sequence-first layer (on_model).
        self.unsubscribe("on_backward", "on_step_end")

    def on_model(self, model: ModelInfo) -> None:
        import torch

        for module in model.inner.modules():
            if isinstance(module, torch.nn.RNNBase) and not module.batch_first:
                self._layers.setdefault(id(module), _Layer(model, module))
        if self._layers and self._handle is None and self._undecided():
            register = torch.nn.modules.module.register_module_forward_pre_hook
            self._handle = register(self._called)
            self.resubscribe("on_backward", "on_step_end")

    def _undecided(self) -> bool:
        return any(
            layer.batch_first_calls + layer.sequence_first_calls < _JUDGED and layer.seen < _SEEN
            for layer in self._layers.values()
        )

    def _called(self, module: Any, args: Any) -> None:
        layer = self._layers.get(id(module))
        if layer is None or not args:
            return
        try:
            self._record(layer, args[0])
        except Exception as error:  # noqa: BLE001 - never break the user's forward
            if raised_by_signal_handler(error):
                raise
            self._stop()

    def _record(self, layer: _Layer, data: Any) -> None:
        shape = getattr(data, "shape", None)  # a PackedSequence has none: not judged
        if shape is None or len(shape) != 3 or compiling():
            return
        layer.seen += 1
        if layer.site is None:
            layer.site = self.monitor.user_site()
        if len(self._pending) < _PENDING:
            self._pending.append((layer, tuple(int(d) for d in shape)))

    def on_batch(self, event: BatchEvent) -> None:
        self._loader_batch = event.loader.batch_size
        self._pending.clear()  # calls made on another batch (an evaluation) say nothing

    def on_backward(self, event: BackwardEvent) -> None:
        if not self._pending:
            return
        targets = _target_shapes(event.loss)
        for layer, shape in self._pending:
            self._judge(layer, shape, targets)
        self._pending.clear()
        if not self._undecided() or self._handle is None:
            self._stop()

    def _judge(self, layer: _Layer, shape: tuple[int, ...], targets: list[tuple[int, ...]]) -> None:
        first, second = shape[0], shape[1]
        if first == second or second == 1:
            return  # a sequence as long as the batch, or a single sequence: ambiguous
        if any(len(t) >= 2 and t[:2] == (first, second) for t in targets):
            return  # per-step targets laid out like the input: no batch dimension to read
        examples = {t[0] for t in targets if t}
        if self._loader_batch:
            examples.add(self._loader_batch)
        if second in examples:
            layer.sequence_first_calls += 1
        elif first in examples:
            layer.batch_first_calls += 1
            layer.shape, layer.examples = shape, first

    def on_step_end(self, event: StepEvent) -> None:
        if self._handle is not None and event.global_step >= _HOOK_STEPS:
            self._stop()

    def _stop(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        if not self._pending:  # no call can be recorded any more: nothing left to judge
            self.unsubscribe("on_backward", "on_step_end")

    def on_finish(self, report: Report) -> None:
        self._stop()
        self._pending.clear()
        for layer in self._layers.values():
            if layer.sequence_first_calls or layer.batch_first_calls < _MIN_SUSPECT:
                continue
            self._emit(layer)

    def _emit(self, layer: _Layer) -> None:
        path = self.monitor.module_path(layer.module) or type(layer.module).__name__
        kind = type(layer.module).__name__
        read_as_steps, read_as_batch = layer.shape[0], layer.shape[1]
        self.emit(
            finding(
                "TD109",
                f"`{path}` ({kind}, built without `batch_first=True`) reads its input as "
                f"(seq, batch, features), but it was given {tuple(layer.shape)} tensors "
                f"whose first dimension is the step's {layer.examples} examples (the "
                f"loss's targets) in {layer.batch_first_calls} of "
                f"{layer.batch_first_calls} judged calls: the recurrence runs across the "
                f"examples, read as {read_as_steps} time steps of a batch of "
                f"{read_as_batch}, so each example's state starts from the previous one's",
                layer.site.location(object=path) if layer.site else Location(object=path),
                Depth.RUN,
                fix_hint="Build the layer with `batch_first=True`, or give it "
                "`x.transpose(0, 1)` (seq, batch, features) and read the output the same "
                "way.",
                evidence={
                    "module": path,
                    "input_shape": list(layer.shape),
                    "examples": layer.examples,
                    "batch_first_calls": layer.batch_first_calls,
                },
            )
        )


def _target_shapes(loss: Any) -> list[tuple[int, ...]]:
    """The shapes of the targets of the loss calls near the top of ``loss``'s graph."""
    shapes = []
    for call in loss_calls(loss):
        target = call.saved("target")
        shape = getattr(target, "shape", None)
        if shape is not None:
            shapes.append(tuple(int(d) for d in shape))
    return shapes
