"""Training steps on copies: what the probes that train (learning, reproducibility, round
trip, loader timing) share.

:func:`copy_for_training` deep-copies the model, the optimizer and a loss module that has
state, in one go, so every tensor the optimizer holds maps to the copy's, including tensors
that are not the model's (a loss module's parameters, another model's). Stepping a copy
therefore never touches a tensor the user holds, whether or not the engine's snapshot
covers it. :func:`train_step` runs one seeded step on such a copy.
"""

from __future__ import annotations

import copy
import inspect
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchdoctor.preflight.failures import call_user

if TYPE_CHECKING:
    from torchdoctor.preflight.batch import Batch
    from torchdoctor.preflight.context import CheckContext

__all__ = ["CopyUnavailable", "TrainingCopy", "copy_for_training", "is_finite", "reduce_loss",
           "forward_loss", "train_step", "with_optimizer"]


class CopyUnavailable(Exception):  # noqa: N818 - a reason to skip, not an error
    """The model cannot be deep-copied (e.g. old ``torch.nn.utils.weight_norm`` keeps a
    computed, non-leaf tensor as an attribute); probes that need a copy skip."""


@dataclass(frozen=True, slots=True)
class TrainingCopy:
    """A model, its optimizer (or ``None``) and its loss, free to train.

    Attributes:
        model: a deep copy of the user's model.
        optimizer: a deep copy of the user's optimizer bound to the copy's tensors, or an
            optimizer built by the probe, or ``None`` (forward and backward only).
        loss_fn: the user's loss, deep-copied when it is a module with state.
    """

    model: Any
    optimizer: Any | None
    loss_fn: Any


def _stateful_module(value: Any) -> bool:
    import torch

    if not isinstance(value, torch.nn.Module):
        return False
    return any(True for _ in value.parameters()) or any(True for _ in value.buffers())


def copy_for_training(ctx: CheckContext, *, with_optimizer: bool = True) -> TrainingCopy:
    """Deep copies of the model, optimizer and stateful loss module, sharing one memo.

    The optimizer copy has the user's class, groups, hyper-parameters and state.

    Raises:
        CopyUnavailable: the objects cannot be deep-copied.
    """
    loss_module = ctx.loss_fn if _stateful_module(ctx.loss_fn) else None
    optimizer = ctx.optimizer if with_optimizer else None
    try:
        model, loss_copy, optimizer_copy = copy.deepcopy((ctx.model, loss_module, optimizer),
                                                         _computed_attributes(ctx.model))
    except (RuntimeError, TypeError, copy.Error) as error:
        raise CopyUnavailable(f"{type(error).__name__}: {error}") from error
    return TrainingCopy(model, optimizer_copy, loss_copy if loss_copy is not None else ctx.loss_fn)


def _computed_attributes(model: Any) -> dict[int, Any]:
    """A deepcopy memo replacing computed tensor attributes by detached clones.

    Pruning and the old ``weight_norm`` keep ``weight`` as a non-leaf tensor computed from
    parameters; torch refuses to deep-copy those, and their forward pre-hooks recompute
    them anyway, so a detached copy of the current value is exact.
    """
    import torch

    memo: dict[int, Any] = {}
    for module in model.modules():
        for value in vars(module).values():
            if isinstance(value, torch.Tensor) and value.grad_fn is not None:
                # Keep requires_grad: it marks the copy as computed state, not stored state.
                memo[id(value)] = value.detach().clone().requires_grad_(value.requires_grad)
    return memo


def with_optimizer(training: TrainingCopy, optimizer: Any) -> TrainingCopy:
    """The same copy, trained by another optimizer."""
    return TrainingCopy(training.model, optimizer, training.loss_fn)


def reduce_loss(loss: Any) -> Any:
    """The scalar that is backpropagated: the loss itself, or its mean when not scalar.

    A loss that is a plain number (the user returned ``.item()``) becomes a tensor that
    nothing can backpropagate through, which is what training with it does too.
    """
    import torch

    if not isinstance(loss, torch.Tensor):
        return torch.as_tensor(float(loss))
    return loss if loss.dim() == 0 else loss.float().mean()


def is_finite(value: float) -> bool:
    """Whether a float is neither NaN nor infinite."""
    return math.isfinite(value)


def _accepts_closure(optimizer: Any) -> bool:
    try:
        return "closure" in inspect.signature(optimizer.step).parameters
    except (TypeError, ValueError):
        return False


def train_step(training: TrainingCopy, batch: Batch, seed: int | None) -> float:
    """One training step on a copy; returns the loss before the update.

    ``torch`` is seeded with ``seed`` first (``None``: the random streams continue). The
    model runs in training mode; gradients are cleared first; without an optimizer only
    forward and backward run. A loss that cannot be backpropagated is evaluated but not
    backpropagated.

    Raises:
        UserCodeError: the user's forward or loss raised.
    """
    import torch

    model, optimizer = training.model, training.optimizer
    model.train()
    if seed is not None:
        torch.manual_seed(seed)
    losses: list[float] = []

    def closure() -> Any:
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
        with torch.enable_grad():
            output = call_user("the model's forward", batch.call, model)
            loss = call_user("the loss function", training.loss_fn, output, batch.targets)
            scalar = reduce_loss(loss)
            if scalar.requires_grad:
                scalar.backward()
        losses.append(float(scalar.detach()))
        return scalar.detach()

    if optimizer is None:
        closure()
    elif _accepts_closure(optimizer):
        optimizer.step(closure)
    else:
        closure()
        optimizer.step()
    return losses[0]


def forward_loss(training: TrainingCopy, batch: Batch) -> float:
    """The loss of one training-mode forward without gradients (the random streams
    continue: nothing is seeded).

    Raises:
        UserCodeError: the user's forward or loss raised.
    """
    import torch

    training.model.train()
    with torch.no_grad():
        output = call_user("the model's forward", batch.call, training.model)
        loss = call_user("the loss function", training.loss_fn, output, batch.targets)
    return float(reduce_loss(loss).detach())
