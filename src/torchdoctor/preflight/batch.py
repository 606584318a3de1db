"""What ``check`` feeds the model: one batch, split into inputs and targets.

Accepted batch shapes (documented in :mod:`torchdoctor.preflight`):

* ``(inputs, targets)``: ``model(inputs)``, or ``model(*inputs)`` when ``inputs`` is a
  tuple or list, or ``model(**inputs)`` when it is a dict;
* ``(input_1, ..., input_k, targets)``: ``model(input_1, ..., input_k)``;
* a dict: the targets are under ``targets``, ``target``, ``labels``, ``label`` or ``y``;
  the inputs under ``inputs``, ``input`` or ``x`` when present (called as above),
  otherwise every other key is passed as a keyword argument;
* elements beyond what the loss compares (``(x, y, weight)``, CTC's ``(images, targets,
  input_lengths, target_lengths)``): when ``loss_fn`` requires ``m`` positional
  arguments, the model gets the first ``n - m + 1`` elements and the loss
  ``loss_fn(output, *rest)``;
* anything, with the user's step (:mod:`torchdoctor.preflight.step`): the whole batch goes
  to ``step(model, batch)``; without a step and without a loss, a dict goes whole to a
  model whose ``forward`` takes its keys and returns an object with a ``loss``.

Floating-point inputs are cast to the model's dtype when every floating-point parameter
is bfloat16, float16 or float64, as a loop that trains such a model casts each batch.

``data`` may also be a DataLoader (or any other iterable of such batches, a list of batches
included): its first batch is used.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from torchdoctor.errors import UsageError
from torchdoctor.preflight.step import StepRunner, describe_batch, step_hint

__all__ = [
    "Batch",
    "CallStyle",
    "is_batch",
    "iter_tensors",
    "model_dtype",
    "move_to",
    "split_batch",
    "step_targets",
]

TARGET_KEYS = ("targets", "target", "labels", "label", "y")
INPUT_KEYS = ("inputs", "input", "x")


class CallStyle(enum.Enum):
    """How the inputs are handed to the model."""

    ONE = "model(inputs)"
    ARGS = "model(*inputs)"
    KWARGS = "model(**inputs)"
    STEP = "step(model, batch)"


@dataclass(frozen=True, slots=True)
class Batch:
    """One batch: what the model gets, what the loss compares it with, and how to call."""

    inputs: Any
    targets: Any
    style: CallStyle
    extra: tuple[Any, ...] = ()  # what the loss gets after the targets
    runner: StepRunner | None = None  # the user's step, for CallStyle.STEP

    def call(self, model: Any) -> Any:
        """Run ``model`` on the inputs, in the batch's call style (a step: the whole batch,
        which is ``inputs``, goes to the step; the model's output is returned)."""
        if self.runner is not None:
            return self.runner.run(model, self.inputs)
        if self.style is CallStyle.ARGS:
            return model(*self.inputs)
        if self.style is CallStyle.KWARGS:
            return model(**self.inputs)
        return model(self.inputs)

    def loss(self, loss_fn: Any, output: Any) -> Any:
        """``loss_fn(output, targets, *extra)``: the loss as the training loop calls it."""
        return loss_fn(output, self.targets, *self.extra)

    def mapped(self, function: Callable[[Any], Any]) -> Batch:
        """The same batch with ``function`` applied to inputs, targets and extras."""
        extra = tuple(function(item) for item in self.extra)
        targets = function(self.targets)
        return Batch(function(self.inputs), targets, self.style, extra, self.runner)

    def to(self, device: Any) -> Batch:
        """The same batch with every tensor moved to ``device``."""
        return self.mapped(lambda value: move_to(value, device))


def is_batch(data: Any) -> bool:
    """Whether ``data`` is one batch (a tuple, list or dict) rather than a loader.

    A list whose items are all tuples, lists or dicts is a list of batches, used like a
    loader.
    """
    if (
        isinstance(data, list)
        and data
        and all(isinstance(item, (tuple, list, dict)) for item in data)
    ):
        return False
    return isinstance(data, (tuple, list, dict))


def split_batch(raw: Any, loss_fn: Any = None, runner: StepRunner | None = None) -> Batch:
    """Split a batch into inputs and targets (the whole batch goes to ``runner``'s step).

    Raises:
        UsageError: the batch has none of the accepted shapes; the message names the
            batch's structure and the ``step=`` to pass.
    """
    if runner is not None:
        return Batch(raw, None, CallStyle.STEP, runner=runner)
    try:
        if isinstance(raw, dict):
            return _split_dict(raw)
        if isinstance(raw, (tuple, list)) and len(raw) >= 2:
            kept = _inputs_count(len(raw), loss_fn)
            if kept > 1:
                return Batch(tuple(raw[:kept]), raw[kept], CallStyle.ARGS, tuple(raw[kept + 1 :]))
            return _with_style(raw[0], raw[1], tuple(raw[2:]))
    except UsageError as error:
        raise UsageError(f"{error}; or {step_hint()}") from None
    raise UsageError(
        f"cannot split a batch that is {describe_batch(raw)} into inputs and targets; "
        f"pass (inputs, targets), (input_1, ..., targets) or a dict with a 'targets' or "
        f"'labels' key, or {step_hint()}"
    )


def _inputs_count(length: int, loss_fn: Any) -> int:
    """How many leading elements of a tuple batch go to the model: all but one, unless
    the loss requires more arguments than ``(output, targets)``."""
    required = _required_positional(loss_fn)
    if required is not None and 2 < required <= length:
        return length - required + 1
    return length - 1


def _required_positional(loss_fn: Any) -> int | None:
    import torch

    target = loss_fn.forward if isinstance(loss_fn, torch.nn.Module) else loss_fn
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return None
    return sum(1 for p in parameters if p.kind in positional and p.default is p.empty)


def _with_style(inputs: Any, targets: Any, extra: tuple[Any, ...] = ()) -> Batch:
    if isinstance(inputs, dict):
        return Batch(inputs, targets, CallStyle.KWARGS, extra)
    if isinstance(inputs, (tuple, list)):
        return Batch(tuple(inputs), targets, CallStyle.ARGS, extra)
    return Batch(inputs, targets, CallStyle.ONE, extra)


def _split_dict(raw: dict[str, Any]) -> Batch:
    target_key = next((key for key in TARGET_KEYS if key in raw), None)
    if target_key is None:
        raise UsageError(
            f"the batch is {describe_batch(raw)}, with no targets; put them under one of "
            f"{', '.join(TARGET_KEYS)}"
        )
    input_key = next((key for key in INPUT_KEYS if key in raw), None)
    if input_key is not None:
        return _with_style(raw[input_key], raw[target_key])
    rest = {key: value for key, value in raw.items() if key != target_key}
    return Batch(rest, raw[target_key], CallStyle.KWARGS)


def move_to(value: Any, device: Any, dtype: Any = None) -> Any:
    """``value`` with every tensor inside (tuples, lists, dicts) moved to ``device`` (and
    every floating-point one cast to ``dtype``, when given)."""
    import torch

    if isinstance(value, torch.Tensor):
        if dtype is not None and value.is_floating_point():
            return value.to(dtype=dtype) if device is None else value.to(device, dtype)
        return value.to(device)
    if isinstance(value, dict):
        return {key: move_to(item, device, dtype) for key, item in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(move_to(item, device, dtype) for item in value))
    if isinstance(value, (tuple, list)):
        return type(value)(move_to(item, device, dtype) for item in value)
    return value


def model_dtype(model: Any) -> Any:
    """The one low- or double-precision dtype of every floating-point parameter of
    ``model`` (bfloat16, float16, float64), else ``None``: inputs are cast to it."""
    import torch

    dtypes = {p.dtype for p in model.parameters() if p.is_floating_point()}
    if len(dtypes) == 1 and (dtype := dtypes.pop()) in (
        torch.bfloat16,
        torch.float16,
        torch.float64,
    ):
        return dtype
    return None


def iter_tensors(value: Any, name: str) -> Iterator[tuple[str, Any]]:
    """Every tensor inside ``value`` with a readable path: ``inputs``, ``inputs['mask']``."""
    import torch

    if isinstance(value, torch.Tensor):
        yield name, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from iter_tensors(item, f"{name}[{key!r}]")
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from iter_tensors(item, f"{name}[{index}]")


def step_targets(model: Any, batch: Batch, seed: int) -> Batch:
    """``batch`` (a step's) with the targets its loss call receives, found by running
    the step once in eval mode without gradients (modes and RNGs are put back); the
    targets stay ``None`` when no known loss functional ran or the step failed (the
    training pass reports that failure)."""
    import torch

    modes = [(module, module.training) for module in model.modules()]
    runner = batch.runner
    assert runner is not None, "a step's batch"
    targets = None
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(seed)
            model.eval()
            runner.run(model, batch.inputs)
            call = runner.last.call if runner.last is not None else None
            if call is not None and any(True for _ in iter_tensors(call.target, "t")):
                targets = call.target
    except Exception:  # noqa: BLE001 - the training pass runs the step again and reports
        targets = None
    finally:
        runner.last = None
        for module, training in modes:
            module.training = training
    return Batch(batch.inputs, targets, batch.style, runner=runner)
