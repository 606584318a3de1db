"""Would the forward still work after ``model.to(device)``? Find out without a GPU.

:func:`find_stray_tensor` copies the model with every parameter and buffer on the
``meta`` device (no data is copied) and runs its forward on a batch moved there too, while
a function mode checks every torch call the way CUDA kernels do: a call that mixes the
model's device with a CPU tensor of one or more dimensions is exactly what raises
"Expected all tensors to be on the same device" on a GPU. Such tensors are created inside
``forward`` without ``device=`` or kept as plain module attributes instead of buffers, so
``model.to()`` leaves them behind.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchdoctor.findings import Location
from torchdoctor.preflight.batch import move_to
from torchdoctor.preflight.failures import user_frame
from torchdoctor.preflight.tracing import ForwardTrace
from torchdoctor.preflight.training import deep_copy

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

__all__ = ["StrayTensor", "find_stray_tensor"]

# Calls that legitimately take CPU tensors next to device tensors (indices, lengths) or
# that move tensors between devices.
_ALLOWED = frozenset(
    {
        "to",
        "copy_",
        "cpu",
        "cuda",
        "type_as",
        "__getitem__",
        "__setitem__",
        "index_put_",
        "_pack_padded_sequence",
        "pack_padded_sequence",
        "new_tensor",
        "__get__",
        "__set__",
    }
)


@dataclass(frozen=True, slots=True)
class StrayTensor:
    """A CPU tensor that met the model's (moved) tensors in a torch call."""

    function: str
    shape: tuple[int, ...]
    attribute: str | None  # "encoder.mask" when it is a plain module attribute
    location: Location


class _Found(Exception):  # noqa: N818 - stops the simulated forward at the first stray
    def __init__(self, stray: StrayTensor) -> None:
        super().__init__(stray.function)
        self.stray = stray


def _meta_copy(model: Any) -> Any:
    """The model with every tensor on the meta device, copied the way every copy in
    ``check`` is made (:func:`torchdoctor.preflight.training.deep_copy`)."""
    import torch

    memo: dict[int, Any] = {}
    for param in model.parameters():
        memo[id(param)] = torch.nn.Parameter(
            torch.empty_like(param, device="meta"), requires_grad=param.requires_grad
        )
    for buffer in model.buffers():
        memo[id(buffer)] = torch.empty_like(buffer, device="meta")
    return deep_copy(
        model,
        model.modules(),
        memo=memo,
        computed=lambda tensor: torch.empty_like(tensor, device="meta"),
    )


def _plain_attributes(model: Any) -> dict[int, str]:
    import torch

    found: dict[int, str] = {}
    for path, module in model.named_modules():
        for key, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not key.startswith("_"):
                found[id(value)] = f"{path}.{key}" if path else key
    return found


def _tensors(values: Any) -> list[Any]:
    import torch

    out: list[Any] = []
    for value in values:
        if isinstance(value, torch.Tensor):
            out.append(value)
        elif isinstance(value, (tuple, list)):
            out.extend(v for v in value if isinstance(v, torch.Tensor))
    return out


def _guard_mode(trace: ForwardTrace, attributes: dict[int, str]) -> Any:
    from torch.overrides import TorchFunctionMode

    # Where each CPU tensor made inside the forward was created (by id; the tensors are
    # kept alive for the forward's duration so that ids stay unique).
    created: dict[int, tuple[Any, Location]] = {}

    class _DeviceGuard(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            tensors = _tensors((*args, *kwargs.values()))
            if name not in _ALLOWED:
                on_meta = any(t.device.type == "meta" for t in tensors)
                stray = next((t for t in tensors if t.device.type == "cpu" and t.dim() > 0), None)
                if on_meta and stray is not None:
                    origin = created.get(id(stray))
                    raise _Found(
                        _describe(
                            name,
                            stray,
                            trace,
                            attributes,
                            origin[1] if origin is not None else None,
                        )
                    )
            result = func(*args, **kwargs)
            _remember_creation(result, tensors, created, trace)
            return result

    return _DeviceGuard()


def _remember_creation(
    result: Any, inputs: list[Any], created: dict[int, tuple[Any, Location]], trace: ForwardTrace
) -> None:
    """Record where a CPU tensor made inside the forward comes from: the user's line of a
    factory call (``torch.arange(n)``), inherited by the CPU tensors computed from it."""
    import torch

    if not isinstance(result, torch.Tensor) or result.device.type != "cpu":
        return
    parent = next((created[id(t)] for t in inputs if id(t) in created), None)
    if parent is not None:
        created[id(result)] = (result, parent[1])
    elif not inputs:
        frame = user_frame(traceback.extract_stack(), inside_model=True)
        if frame is not None:
            module = trace.current_module
            created[id(result)] = (
                result,
                Location(
                    path=frame.filename,
                    line=frame.lineno,
                    snippet=frame.line or None,
                    object=(module or type(trace.model).__name__) if module is not None else None,
                ),
            )


def _describe(
    name: str,
    stray: Any,
    trace: ForwardTrace,
    attributes: dict[int, str],
    created_at: Location | None = None,
) -> StrayTensor:
    if created_at is not None:  # the line that made the tensor, not the one that used it
        return StrayTensor(name, tuple(stray.shape), attributes.get(id(stray)), created_at)
    frame = user_frame(traceback.extract_stack(), inside_model=True)
    module = trace.current_module
    display = (module or type(trace.model).__name__) if module is not None else None
    location = (
        Location(path=frame.filename, line=frame.lineno, object=display, snippet=frame.line or None)
        if frame is not None
        else Location(object=display)
    )
    return StrayTensor(name, tuple(stray.shape), attributes.get(id(stray)), location)


def find_stray_tensor(ctx: CheckContext) -> StrayTensor | None:
    """The first CPU tensor that would not follow ``model.to(device)``, or ``None``.

    Inconclusive runs (the copy or the meta forward fails for another reason, such as
    code that reads tensor values) return ``None``.
    """
    import torch

    try:
        model = _meta_copy(ctx.model)
        inputs = move_to(ctx.batch_as_given.inputs, "meta")
    except Exception:  # noqa: BLE001 - uncopyable models cannot be simulated
        return None
    given = ctx.batch_as_given
    batch = type(given)(inputs, None, given.style, runner=given.runner)
    trace = ForwardTrace(model)
    model.train()
    try:
        with torch.no_grad(), trace, _guard_mode(trace, _plain_attributes(model)):
            batch.call(model)
    except _Found as found:
        return found.stray
    except Exception:  # noqa: BLE001 - meta kernels cannot run everything
        return None
    return None
