"""The shared training pass: one forward, loss and backward on the user's model.

It runs once per check (cached by the context) and keeps only what the probes need:
detached outputs, the tensors the loss functional received, the op that produced them,
every parameter's gradient, and the forward trace. Its side effects on the model (grads,
BatchNorm statistics, mode) are undone by the engine's snapshot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchdoctor.errors import UsageError
from torchdoctor.preflight.explain import forward_failure, loss_failure
from torchdoctor.preflight.failures import SharedWorkFailed, user_code_error
from torchdoctor.preflight.losses import ClassIndexOutOfRange, LossCall, LossRecorder
from torchdoctor.preflight.step import is_loss_value
from torchdoctor.preflight.tracing import ForwardTrace
from torchdoctor.preflight.training import unpack_loss

if TYPE_CHECKING:
    from torchdoctor.preflight.protocols import PassContext

__all__ = ["TrainPass", "normalisations_upstream", "producing_op", "run_train_pass"]

# Ops that only move or reshape values: look through them to the op that computed them.
_PASS_THROUGH = frozenset(
    {
        "View",
        "Reshape",
        "ReshapeAlias",
        "UnsafeView",
        "Squeeze",
        "Unsqueeze",
        "Permute",
        "Transpose",
        "T",
        "Clone",
        "ToCopy",
        "Slice",
        "Select",
        "Expand",
        "Alias",
        "Contiguous",
    }
)
_BACKWARD_SUFFIX = re.compile(r"Backward\d*$")
# Elementwise arithmetic a loss applies to normalised scores (a focal loss's
# `(1 - p) ** gamma * log_p`, a mask, a temperature): it keeps what the scores are.
_ELEMENTWISE = frozenset(
    {
        "Mul",
        "Div",
        "Pow",
        "Add",
        "Sub",
        "Rsub",
        "Neg",
        "Exp",
        "Clamp",
        "ClampMin",
        "ClampMax",
        "MaskedFill",
        "Where",
        "Index",
        "Gather",
    }
)
_NORMALISATIONS = frozenset({"Softmax", "LogSoftmax", "Sigmoid"})
_UPSTREAM_LIMIT = 64  # graph nodes visited; the arithmetic after a normalisation is short


@dataclass(frozen=True, slots=True)
class TrainPass:
    """The results of the shared training pass (all tensors detached).

    Attributes:
        output: what the model returned.
        loss: the loss value, or ``None`` when the loss raised (see ``loss_error``).
        loss_error: the failure to re-raise when a probe needs the loss.
        loss_call: the known loss functional the loss called, with its arguments.
        loss_input: the scores the loss functional received (or the output).
        loss_target: the target the loss functional received (or the batch's).
        loss_input_op: op that computed ``loss_input`` (``"Softmax"``, ``"Sigmoid"``...).
        loss_input_module: module path whose output is ``loss_input``, if any.
        loss_input_sources: normalisations ``loss_input`` derives from through
            elementwise arithmetic (see :func:`normalisations_upstream`).
        gradients: parameter name -> gradient (``None``: no gradient reached it), for
            every parameter that requires grad.
        backward_error: why the backward pass could not run, if it did not.
        trace: the forward trace (module order, ReLU statistics, first-layer input).
    """

    output: Any
    loss: Any
    loss_error: BaseException | None
    loss_call: LossCall | None
    loss_input: Any
    loss_target: Any
    loss_input_op: str | None
    loss_input_module: str | None
    loss_input_sources: frozenset[str]
    gradients: dict[str, Any]
    backward_error: str | None
    trace: ForwardTrace

    def require_loss(self) -> Any:
        """The loss value; re-raises the loss's failure when it had none."""
        if self.loss_error is not None:
            raise self.loss_error
        return self.loss


def _detach(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, dict):
        return {key: _detach(item) for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return [_detach(item) for item in value]
    return value


def producing_op(tensor: Any) -> str | None:
    """The autograd op that computed ``tensor``, looking through views and copies."""
    node = getattr(tensor, "grad_fn", None)
    while node is not None:
        name = _BACKWARD_SUFFIX.sub("", node.name())
        if name not in _PASS_THROUGH:
            return name
        inputs = [edge[0] for edge in node.next_functions if edge[0] is not None]
        node = inputs[0] if len(inputs) == 1 else None
    return None


def normalisations_upstream(tensor: Any) -> frozenset[str]:
    """The normalisations (softmax, log_softmax, sigmoid) that ``tensor`` was computed
    from through elementwise arithmetic only; a layer with weights in between hides them."""
    found: set[str] = set()
    pending = [getattr(tensor, "grad_fn", None)]
    visited = 0
    while pending and visited < _UPSTREAM_LIMIT:
        node = pending.pop()
        if node is None:
            continue
        visited += 1
        name = _BACKWARD_SUFFIX.sub("", node.name())
        if name in _NORMALISATIONS:
            found.add(name)
        elif name in _ELEMENTWISE or name in _PASS_THROUGH:
            pending.extend(edge[0] for edge in node.next_functions)
    return frozenset(found)


def _check_materialised(ctx: PassContext) -> None:
    for name, tensor in (*ctx.model.named_parameters(), *ctx.model.named_buffers()):
        if tensor.device.type == "meta":
            raise UsageError(
                f"`{name}` is on the meta device and holds no data, so the model cannot run; "
                "materialise it first (`model.to_empty(device=...)` and load the weights)"
            )


def _forward(ctx: PassContext, trace: ForwardTrace) -> Any:
    import torch

    ctx.model.train()
    torch.manual_seed(ctx.seed)
    try:
        with torch.enable_grad(), trace:
            return ctx.batch.call(ctx.model)
    except UsageError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's forward
        module = trace.current_module
        _refuse_unbindable(ctx, error)
        explained = (
            loss_failure(ctx, error, error.call)  # raised by a step's loss call
            if isinstance(error, ClassIndexOutOfRange)
            else forward_failure(ctx, error, module)
        )
        if explained is not None:
            raise SharedWorkFailed(explained) from error
        raise user_code_error(
            "the model's forward", error, ctx.name(module) if module is not None else None
        ) from error


def _refuse_unbindable(ctx: PassContext, error: BaseException) -> None:
    """A ``forward`` that cannot take the inputs as the batch was split (an unexpected
    keyword, a missing argument) fails when Python binds the call, inside torch's module
    call: say how the batch was split and which ``step=`` to pass, not "forward raised".

    Raises:
        UsageError: in that case.
    """
    from torchdoctor.preflight.batch import CallStyle
    from torchdoctor.preflight.step import describe_batch, step_hint

    batch = ctx.batch
    if not isinstance(error, TypeError) or batch.style is CallStyle.STEP:
        return
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = tb.tb_frame.f_code.co_filename.replace("\\", "/") if tb is not None else ""
    if not where.endswith("torch/nn/modules/module.py"):
        return  # raised inside the user's forward, not when binding its arguments
    raise UsageError(
        f"`{ctx.name('')}.forward` cannot take the batch as check splits it "
        f"({batch.style.value} with inputs {describe_batch(batch.inputs)}): {error}; "
        f"{step_hint()}"
    ) from None


def _loss(ctx: PassContext, output: Any) -> tuple[Any, BaseException | None, LossCall | None]:
    import torch

    recorder = LossRecorder()
    try:
        with torch.enable_grad(), recorder:
            loss = ctx.batch.loss(ctx.loss_fn, output)
    except Exception as error:  # noqa: BLE001 - the user's loss
        explained = loss_failure(ctx, error, recorder.call)
        failure: BaseException = (
            SharedWorkFailed(explained)
            if explained is not None
            else user_code_error("the loss function", error)
        )
        failure.__cause__ = error
        return None, failure, recorder.call
    loss = unpack_loss(loss)  # the common `return loss, logs` shape
    if not is_loss_value(loss):
        raise UsageError(
            f"loss_fn returned a {type(loss).__name__}; it must return the loss "
            "as a tensor (or a tuple whose first item is the loss)"
        )
    return loss, None, recorder.call


def _backward(ctx: PassContext, loss: Any) -> str | None:
    import torch

    if not isinstance(loss, torch.Tensor):
        return (
            f"loss_fn returns a Python {type(loss).__name__} (from `.item()` or "
            "`float()`), not a tensor, so nothing can be backpropagated"
        )
    if not loss.requires_grad:
        return "the loss does not require grad: no parameter takes part in computing it"
    try:
        scalar = loss if loss.dim() == 0 else loss.float().mean()
        scalar.backward()  # type: ignore[no-untyped-call]
    except Exception as error:  # noqa: BLE001 - user autograd code; reported, not fatal
        return f"{type(error).__name__}: {error}"
    return None


def run_train_pass(ctx: PassContext) -> TrainPass:
    """Run the shared training pass on the user's model (see :class:`TrainPass`)."""
    import torch

    _check_materialised(ctx)
    ctx.batch  # noqa: B018 - load the batch before hooks go on, so its errors stay its own
    params = [(n, p) for n, p in ctx.model.named_parameters() if p.requires_grad]
    for _, param in params:
        param.grad = None
    trace = ForwardTrace(ctx.model, activations=ctx.enabled("TD217"))
    output = _forward(ctx, trace)
    loss, loss_error, call = _loss(ctx, output)
    scores = call.input if call is not None else output
    target = call.target if call is not None else ctx.batch.targets
    op = producing_op(scores) if isinstance(scores, torch.Tensor) else None
    sources = normalisations_upstream(scores)
    module = trace.producer_of(scores)
    if call is not None:  # keep the values, drop the graph
        call.input, call.target = _detach(call.input), _detach(call.target)
    backward_error = _backward(ctx, loss) if loss_error is None else "the loss raised"
    gradients = {name: (p.grad.detach() if p.grad is not None else None) for name, p in params}
    if loss is not None and not isinstance(loss, torch.Tensor):
        loss = torch.as_tensor(float(loss))
    return TrainPass(
        output=_detach(output),
        loss=_detach(loss),
        loss_error=loss_error,
        loss_call=call,
        loss_input=_detach(scores),
        loss_target=_detach(target),
        loss_input_op=op,
        loss_input_module=module,
        loss_input_sources=sources,
        gradients=gradients,
        backward_error=backward_error,
        trace=trace,
    )
