"""Where a value came from: the source line of an op, the module that made a NaN.

These rerun the forward on the user's model (the engine restores it afterwards), so
probes call them only once they have found a problem worth locating.
"""

from __future__ import annotations

import re
import traceback
import warnings
from typing import TYPE_CHECKING, Any

from torchdoctor.findings import Location
from torchdoctor.preflight.failures import user_frame
from torchdoctor.preflight.losses import LossRecorder
from torchdoctor.preflight.passes import _BACKWARD_SUFFIX, _PASS_THROUGH
from torchdoctor.preflight.tracing import ForwardTrace

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

__all__ = ["loss_input_location", "non_finite_loss_op", "non_finite_origin"]

_FRAME = re.compile(
    r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>[^\n]+)\n'
    r"(?:\s*(?P<code>[^\n]*))?"
)


def _producing_node(tensor: Any) -> Any:
    node = getattr(tensor, "grad_fn", None)
    while node is not None and _BACKWARD_SUFFIX.sub("", node.name()) in _PASS_THROUGH:
        inputs = [edge[0] for edge in node.next_functions if edge[0] is not None]
        node = inputs[0] if len(inputs) == 1 else None
    return node


def _frames(lines: list[str]) -> list[traceback.FrameSummary]:
    frames = []
    for entry in lines:
        match = _FRAME.search(entry)
        if match:
            frames.append(
                traceback.FrameSummary(
                    match["file"], int(match["line"]), match["name"], line=match["code"] or ""
                )
            )
    return frames


def loss_input_location(ctx: CheckContext, module: str | None) -> Location:
    """The user's source line that computed the loss's input, plus its module path.

    Reruns the forward and the loss under anomaly mode, which records the stack of every
    autograd op; falls back to the module path alone.
    """
    import torch

    fallback = Location(object=ctx.name(module) if module is not None else "model output")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autograd.detect_anomaly(check_nan=False), LossRecorder() as recorder:
                output = ctx.forward(ctx.model)
                ctx.batch.loss(ctx.loss_fn, output)
    except Exception:  # noqa: BLE001 - only a better location is at stake
        return fallback
    scores = recorder.call.input if recorder.call is not None else output
    node = _producing_node(scores)
    stack = node.metadata.get("traceback_") if node is not None else None
    frame = user_frame(_frames(stack), inside_model=True) if isinstance(stack, list) else None
    if frame is None:
        return fallback
    return Location(
        path=frame.filename, line=frame.lineno, object=fallback.object, snippet=frame.line or None
    )


def non_finite_origin(ctx: CheckContext) -> str | None:
    """The first module whose output is non-finite although its inputs were finite."""
    import torch

    found: list[str] = []
    trace = ForwardTrace(ctx.model)

    def finite(values: Any) -> bool:
        return all(bool(torch.isfinite(v).all()) for v in _tensors(values) if v.is_floating_point())

    def after(module: Any, args: Any, output: Any) -> None:
        if not found and not finite(output) and finite(args):
            found.append(trace.names.get(module, "?"))

    handles = [m.register_forward_hook(after) for m in trace.names]
    try:
        with trace:
            ctx.forward(ctx.model, grad=False)
    except Exception:  # noqa: BLE001 - only a better location is at stake
        return None
    finally:
        for handle in handles:
            handle.remove()
    return found[0] if found else None


def _tensors(values: Any) -> list[Any]:
    import torch

    if isinstance(values, torch.Tensor):
        return [values]
    if isinstance(values, (tuple, list)):
        return [v for item in values for v in _tensors(item)]
    if isinstance(values, dict):
        return [v for item in values.values() for v in _tensors(item)]
    return []


def _all_finite(values: Any) -> bool:
    import torch

    return all(bool(torch.isfinite(v).all()) for v in _tensors(values) if v.is_floating_point())


def _non_finite_mode(found: list[tuple[str, Location]]) -> Any:
    from torch.overrides import TorchFunctionMode

    class _Watch(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            result = func(*args, **(kwargs or {}))
            if (
                not found
                and not _all_finite(result)
                and _all_finite((list(args), list((kwargs or {}).values())))
            ):
                frame = user_frame(traceback.extract_stack())
                name = getattr(func, "__name__", "an op")
                found.append(
                    (
                        name,
                        Location(
                            path=frame.filename,
                            line=frame.lineno,
                            snippet=frame.line or None,
                            object="loss_fn",
                        )
                        if frame is not None
                        else Location(object="loss_fn"),
                    )
                )
            return result

    return _Watch()


def non_finite_loss_op(ctx: CheckContext) -> tuple[str, Location] | None:
    """The first op inside the loss function that turns finite values into NaN/Inf.

    Returns the op's name and the user's line that called it.
    """
    import torch

    found: list[tuple[str, Location]] = []
    try:
        with torch.no_grad():
            output = ctx.forward(ctx.model, grad=False)
            with LossRecorder(), _non_finite_mode(found):
                ctx.batch.loss(ctx.loss_fn, output)
    except Exception:  # noqa: BLE001 - only a better location is at stake
        return None
    return found[0] if found else None
