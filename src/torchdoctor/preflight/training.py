"""Training steps on copies: what the probes that train or experiment (learning,
reproducibility, round trip, loader timing, zero-initialisation) share.

:func:`copy_for_training` is the one way ``check`` copies the user's objects. It
deep-copies the model, the optimizer and a loss module (or a loss that is a method of a
module) in one go, sharing one memo, so every tensor the optimizer holds maps to the
copy's, including tensors that are not the model's (a loss module's parameters, a learned
temperature passed to the optimizer on its own): stepping a copy never touches a tensor
the user holds. Pruned models and the old ``weight_norm`` keep computed tensors as
attributes, which torch refuses to deep-copy; the memo hands it detached clones instead.
A torch optimizer's deep copy keeps its class, groups, hyper-parameters and state but not
the wrappers a learning-rate scheduler puts on ``step`` nor step hooks, which would reach
back to the user's optimizer and its callbacks. :func:`train_step` runs one seeded step
on such a copy.
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchdoctor.preflight.failures import call_user
from torchdoctor.preflight.step import is_loss_value

if TYPE_CHECKING:
    from torchdoctor.preflight.batch import Batch
    from torchdoctor.preflight.protocols import UserObjects

__all__ = [
    "CopyUnavailable",
    "TrainingCopy",
    "copy_for_training",
    "deep_copy",
    "forward_loss",
    "is_finite",
    "reduce_loss",
    "train_step",
    "unpack_loss",
    "with_optimizer",
]


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


def _loss_to_copy(loss_fn: Any) -> Any | None:
    """The loss itself when it is a module, or a method of one, that a copy must not share."""
    import torch

    owner = getattr(loss_fn, "__self__", None)
    if isinstance(loss_fn, torch.nn.Module) or isinstance(owner, torch.nn.Module):
        return loss_fn
    return None


def copy_for_training(ctx: UserObjects, *, with_optimizer: bool = True) -> TrainingCopy:
    """Deep copies of the model, optimizer and loss module, sharing one memo.

    Raises:
        CopyUnavailable: the objects cannot be deep-copied.
    """
    import torch

    loss = _loss_to_copy(ctx.loss_fn)
    optimizer = ctx.optimizer if with_optimizer else None
    owner = loss if isinstance(loss, torch.nn.Module) else getattr(loss, "__self__", None)
    modules = [*ctx.model.modules(), *(owner.modules() if owner is not None else ())]
    model, loss_copy, optimizer_copy = deep_copy((ctx.model, loss, optimizer), modules)
    return TrainingCopy(model, optimizer_copy, loss_copy if loss is not None else ctx.loss_fn)


def deep_copy(
    objects: Any,
    modules: Iterable[Any],
    *,
    memo: dict[int, Any] | None = None,
    computed: Callable[[Any], Any] | None = None,
) -> Any:
    """``copy.deepcopy(objects)`` in one go, as every copy ``check`` makes is made.

    Pruning and the old ``weight_norm`` keep ``weight`` as a non-leaf tensor computed from
    parameters; torch refuses to deep-copy those. Their forward pre-hooks recompute them
    anyway, so each such attribute of ``modules`` is replaced by ``computed(tensor)``
    (default: a detached clone, exact until the next forward). ``memo`` may map other
    objects to their stand-ins (the meta-device copy does so for every tensor).

    Raises:
        CopyUnavailable: the objects cannot be deep-copied.
    """
    import torch

    memo = dict(memo or {})
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, torch.Tensor) and value.grad_fn is not None:
                memo.setdefault(id(value), (computed or _detached)(value))
    try:
        copied = copy.deepcopy(objects, memo)
        _restore_dropped_state(torch, objects, copied, memo)
        return copied
    except (RuntimeError, TypeError, AttributeError, copy.Error) as error:
        raise CopyUnavailable(f"{type(error).__name__}: {error}") from error


def _restore_dropped_state(torch: Any, objects: Any, copied: Any, memo: dict[int, Any]) -> None:
    """``Optimizer.__getstate__`` keeps only defaults, state and param_groups, so a deep
    copy of LBFGS (``_params``, ``_numel_cache``) or of a user's optimizer with its own
    attributes lacks them; they are copied over with the same memo (the same parameter
    copies)."""
    pairs = (
        zip(objects, copied, strict=False)
        if isinstance(objects, (tuple, list))
        else [(objects, copied)]
    )
    for original, twin in pairs:
        if isinstance(original, torch.optim.Optimizer) and twin is not original:
            for name, value in vars(original).items():
                # Data only: a wrapped ``step`` a scheduler left on the instance would
                # still call the user's optimizer.
                if name not in vars(twin) and not callable(value):
                    setattr(twin, name, copy.deepcopy(value, memo))


def _detached(tensor: Any) -> Any:
    # Keep requires_grad: it marks the copy as computed state, not stored state.
    return tensor.detach().clone().requires_grad_(tensor.requires_grad)


def with_optimizer(training: TrainingCopy, optimizer: Any) -> TrainingCopy:
    """The same copy, trained by another optimizer."""
    return TrainingCopy(training.model, optimizer, training.loss_fn)


def reduce_loss(loss: Any) -> Any:
    """The scalar that is backpropagated: the loss itself, or its mean when not scalar.

    ``(loss, logs)`` gives its first item. A loss that is a plain number (the user
    returned ``.item()``) becomes a tensor that nothing can backpropagate through, which
    is what training with it does too.
    """
    import torch

    loss = unpack_loss(loss)
    if not isinstance(loss, torch.Tensor):
        return torch.as_tensor(float(loss))
    return loss if loss.dim() == 0 else loss.float().mean()


def unpack_loss(value: Any) -> Any:
    """What ``loss_fn`` returned, without the logs of a ``(loss, logs)`` pair."""
    if isinstance(value, (tuple, list)) and value and is_loss_value(value[0]):
        return value[0]
    return value


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
            loss = call_user("the loss function", batch.loss, training.loss_fn, output)
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
        loss = call_user("the loss function", batch.loss, training.loss_fn, output)
    return float(reduce_loss(loss).detach())
