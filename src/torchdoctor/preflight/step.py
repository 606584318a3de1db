"""The user's own training step, run by ``check`` and watched through hooks.

``step(model, batch)`` returns the loss, ``(loss, outputs)``, or an object (or dict) with a
``loss`` (a Hugging Face model's output). ``check`` has no ``(inputs, targets)`` contract
with it: :class:`StepRunner` runs the step and observes what it did — the model's forward
output (a forward hook on the model), the loss functional it called with its inputs and
targets (:class:`~torchdoctor.preflight.losses.LossRecorder`) — and :class:`StepLoss`
stands in for ``loss_fn`` so every probe keeps its ``loss_fn(output, targets)`` view: it
hands back the loss of the step that produced ``output`` and calls the recorded loss
functional again, so an outer recorder sees the same call.

Without a step and without a loss function, :func:`whole_batch_step` is the step: a dict
batch goes whole to a model whose ``forward`` takes its keys, and the output's ``loss`` is
the loss.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from torchdoctor.errors import UsageError
from torchdoctor.preflight.losses import LossCall, LossRecorder

__all__ = [
    "StepLoss",
    "check_whole_batch",
    "is_loss_value",
    "StepRunner",
    "describe_batch",
    "step_hint",
    "whole_batch_step",
]


@dataclass(slots=True)
class StepResult:
    """What one run of the step produced: the forward's output, the loss, the loss call."""

    output: Any
    loss: Any
    call: LossCall | None


class StepRunner:
    """Runs ``step(model, batch)`` and remembers what the last run produced."""

    def __init__(self, step: Any) -> None:
        self.step = step
        self.last: StepResult | None = None

    def run(self, model: Any, raw: Any) -> Any:
        """Run the step on ``raw``; return the model's output (what probes compare)."""
        outputs: list[Any] = []
        handle = model.register_forward_hook(lambda _m, _a, out: outputs.append(out))
        try:
            with LossRecorder() as recorder:
                result = self.step(model, raw)
        finally:
            handle.remove()
        loss, returned = split_result(result)
        if loss is None:
            raise UsageError(
                f"the step returned {type(result).__name__} without a loss; return the loss, "
                "(loss, outputs), or an object with a `loss` attribute"
            )
        output = returned if returned is not None else (outputs[0] if outputs else None)
        self.last = StepResult(main_output(output), loss, recorder.call)
        return self.last.output


def split_result(result: Any) -> tuple[Any, Any]:
    """``(loss, outputs)`` from what a step returned (``outputs`` may be ``None``)."""
    if is_loss_value(result):
        return result, None
    if isinstance(result, (tuple, list)) and result and is_loss_value(result[0]):
        return result[0], (result[1] if len(result) > 1 else None)
    loss = result.get("loss") if isinstance(result, dict) else getattr(result, "loss", None)
    return (loss, result) if is_loss_value(loss) else (None, None)


def main_output(output: Any) -> Any:
    """The tensor the probes read from a model output: the output itself, or the
    ``logits`` of an object that carries the loss beside them."""
    logits = output.get("logits") if isinstance(output, dict) else getattr(output, "logits", None)
    return logits if logits is not None and hasattr(logits, "shape") else output


class StepLoss:
    """``loss_fn(output, targets)`` for a check driven by a step (see the module doc)."""

    def __init__(self, runner: StepRunner) -> None:
        self.runner = runner
        self.__qualname__ = getattr(runner.step, "__qualname__", "step")

    def __call__(self, output: Any, *_targets: Any) -> Any:
        last = self.runner.last
        if last is None:
            raise UsageError("the step has not run yet")
        call = last.call
        if output is last.output:
            if call is not None:
                _call_again(call, call.input)  # seen by a recorder around this call
            return last.loss
        # Another output (a probe's variant): the recorded loss call on it, when the
        # step gave the model's output straight to its loss.
        if call is not None and call.input is last.output:
            return _call_again(call, output)
        raise UsageError("the step's loss cannot be computed for another output")


def _call_again(call: LossCall, scores: Any) -> Any:
    import torch.nn.functional as F

    function = getattr(F, call.spec.name.removeprefix("F."))
    return function(scores, call.target, **call.options)


def check_whole_batch(runner: StepRunner, model: Any, raw: Any) -> None:
    """Refuse a batch that cannot go whole to the model when there is no loss function.

    Raises:
        UsageError: naming the batch's structure and the ``step=`` to pass.
    """
    if runner.step is not whole_batch_step:
        return
    if isinstance(raw, dict) and takes_keys(model, raw):
        return
    reason = (
        f"`{type(model).__name__}.forward` does not take the keys {sorted(raw)}"
        if isinstance(raw, dict)
        else "only a dict batch goes whole to a model"
    )
    raise UsageError(
        "without a loss function, check passes a dict batch whole to a model that "
        f"returns its own loss (`model(**batch).loss`), but the batch is "
        f"{describe_batch(raw)} and {reason}; give loss_fn, or {step_hint()}"
    )


def whole_batch_step(model: Any, batch: Any) -> Any:
    """The step of a model that computes its own loss: ``model(**batch)``."""
    return model(**batch)


def takes_keys(model: Any, keys: Any) -> bool:
    """Whether ``model.forward`` accepts every key of a dict batch as a keyword."""
    try:
        parameters = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return True
    names = {p.name for p in parameters if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    return set(keys) <= names


def describe_batch(raw: Any, depth: int = 0) -> str:
    """A batch's structure in words: ``dict with keys 'x' (float32 [8, 3]), 'y' (...)``."""
    import torch

    if isinstance(raw, torch.Tensor):
        return f"{str(raw.dtype).removeprefix('torch.')} {list(raw.shape)}"
    if depth > 1:
        return type(raw).__name__
    if isinstance(raw, dict):
        items = ", ".join(f"{k!r} ({describe_batch(v, depth + 1)})" for k, v in raw.items())
        return f"a dict with keys {items}"
    if isinstance(raw, (tuple, list)):
        items = ", ".join(describe_batch(v, depth + 1) for v in raw)
        return f"a {type(raw).__name__} of {len(raw)} ({items})"
    return f"a {type(raw).__name__}"


def step_hint() -> str:
    """The line to add when ``check`` cannot tell how a batch trains the model."""
    return (
        "pass the step your training loop runs: `check(model, data, optimizer=optimizer, "
        "step=train_step)` with `def train_step(model, batch): ...; return loss` (or "
        "`(loss, outputs)`); a factory returns it under the key `step`"
    )


def is_loss_value(value: Any) -> bool:
    """A tensor, or a plain number: a loss returned as ``loss.item()`` trains nothing,
    which the probes report instead of stopping the check."""
    import numbers

    import torch

    return isinstance(value, (torch.Tensor, numbers.Real)) and not isinstance(value, bool)
