"""The output layer frozen at its random initialisation, seen in the first steps' loss
graphs (TD226 at run time; ``check`` asks the same verdict on its training pass).

The invariant: the layer whose output a loss takes is trained, or was trained or loaded
before it was frozen. A freshly built head (``model.fc = nn.Linear(...)``) frozen by a
freezing loop that ran after it was attached (``for p in model.parameters(): p.requires_grad
= False`` plus re-enabling only some kinds of parameter, such as the normalisation layers),
maps the features to a fixed random projection, and the parameters that do train cannot
repair that.

During the first backward passes a global forward hook remembers which module made each
output that has a graph (one dictionary write per layer call); at ``backward()`` the loss's
own call is found in the graph (:func:`.loss_nodes.loss_calls`), and the node under its
input, through activations of the loss family (softmax, sigmoid) and reshapes, names the
layer. The verdict is :func:`torchdoctor.runtime.frozen_layers.frozen_output_layer`:
quiet on a frozen head that was trained or loaded (its weight is no longer a default draw),
on a model frozen whole, and on losses written by hand (no loss node to start from). The
hook is removed after :data:`JUDGED` judged passes or :data:`BACKWARDS` backward passes,
and put back for a while when a new optimizer takes its first step (a second phase or
model); a run with no backward pass (inference) drops it after 20,000 layer calls. Cost
while it is on: one Python call per layer call (about 7 % of a forward of tiny layers with
no work, measured), and a dictionary write per output that has a
graph.
"""

from __future__ import annotations

from typing import Any

from torchdoctor._kernel import raised_by_signal_handler
from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    BackwardEvent,
    MonitorView,
    OptimizerInfo,
    RuntimeDetector,
)
from torchdoctor.runtime.detectors.loss_nodes import below_shape_ops, compiling, loss_calls

__all__ = ["OutputLayerFrozenAtInit"]

JUDGED = 3  # backward passes whose loss input was traced to a layer
BACKWARDS = 20  # backward passes (or optimizer steps) watched at most
_PRODUCERS = 4096  # outputs remembered between two backward passes at most
_CALLS = 20_000  # layer calls watched per window (a run with no backward stops paying)
# Nodes a loss family applies to the scores it is given (cross-entropy written as
# log_softmax + nll_loss): the layer is below them.
_SQUASHING = frozenset(
    {"LogSoftmaxBackward0", "SoftmaxBackward0", "SigmoidBackward0", "LogSigmoidBackward0"}
)


@detector("TD226", depth=Depth.RUN)
class OutputLayerFrozenAtInit(RuntimeDetector):
    """Traces the loss's input to the layer that made it during the first steps."""

    def __init__(self) -> None:
        self._producers: dict[int, tuple[str, Any]] = {}  # id(grad_fn) -> (node name, layer)
        self._hook: Any = None
        self._judged = 0  # in the current window
        self._left = 0  # backward passes left in the current window
        self._calls = 0  # layer calls seen in the current window
        self._seen: set[int] = set()
        self._error: BaseException | None = None

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        self._open()

    def on_optimizer(self, optimizer: OptimizerInfo) -> None:
        self._open()  # a new phase (fine-tuning after pre-training, a second model)

    def _open(self) -> None:
        """Watch the next backward passes (again)."""
        from torchdoctor.runtime.hooks import global_forward_hook

        self._judged, self._left, self._calls = 0, BACKWARDS, 0
        if self._hook is None and self._error is None:
            self._hook = global_forward_hook(self._record)
            self.resubscribe("on_backward")

    def _record(self, module: Any, args: Any, output: Any) -> None:
        self._calls += 1
        if self._calls > _CALLS:
            self._close()
            return
        try:
            node = getattr(output, "grad_fn", None)
            if node is not None and module._parameters and getattr(self.monitor, "enabled", 1):
                if len(self._producers) >= _PRODUCERS:  # forwards with a graph, no backward
                    self._producers.clear()
                self._producers.setdefault(id(node), (node.name(), module))
        except Exception as error:  # noqa: BLE001 - never break the user's forward
            if raised_by_signal_handler(error):
                raise
            self._error = error
            self._close()

    def on_backward(self, event: BackwardEvent) -> None:
        if self._hook is None:
            return
        try:
            if not compiling():
                self._judge(event.loss)
        finally:
            self._producers.clear()
            self._left -= 1
            if self._judged >= JUDGED or self._left <= 0:
                self._close()

    def _judge(self, loss: Any) -> None:
        for call in loss_calls(loss):
            node = call.argument_node(0)
            for _ in range(8):
                node = below_shape_ops(node)
                if node is None or node.name() not in _SQUASHING or not node.next_functions:
                    break
                node = node.next_functions[0][0]
            made = self._producers.get(id(node)) if node is not None else None
            if made is None or made[0] != node.name():
                continue
            self._judged += 1
            layer = made[1]
            if id(layer) not in self._seen:
                self._seen.add(id(layer))
                self._verdict(layer)

    def _verdict(self, layer: Any) -> None:
        from torchdoctor.runtime.frozen_layers import frozen_output_layer

        first = next(layer.parameters(), None)
        model = self.monitor.model_of(first) if first is not None else None
        if model is None:
            return
        name = self.monitor.module_path(layer) or type(layer).__name__
        verdict = frozen_output_layer(model.inner, layer, name)
        if verdict is None:
            return
        self.emit(
            finding(
                "TD226",
                verdict.message(),
                Location(object=verdict.name),  # the freezing line is long past: no line
                Depth.RUN,
                fix_hint=verdict.fix_hint(),
                evidence=verdict.evidence(),
            )
        )

    def _close(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        self._producers.clear()
        self.unsubscribe("on_backward")  # nothing recorded to judge until _open()

    def on_finish(self, report: Report) -> None:
        self._close()
        if self._error is not None:
            raise self._error  # a failure of ours in the hook: one TD001, as elsewhere
