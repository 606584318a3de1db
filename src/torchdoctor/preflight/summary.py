"""The model summary: what is in the model, module by module.

For every module (the root first): its parameters (trainable and not), buffer elements,
dtype and device, the shape of its output on the probe batch, and the bytes autograd
keeps for backward while its forward runs (activation memory). Counts of a module include
its submodules; a parameter shared by several modules (tied embeddings) is counted once,
at the first module that holds it, and the shared names are listed.

Output shapes and activation bytes come from one training-mode forward on a fake copy of
the model (:mod:`torchdoctor.preflight.memory_step`): no data is computed and no memory is
allocated, so it works for models built on the ``meta`` device and for models larger
than this machine. A tensor saved for backward is counted once (by storage) and
attributed to the innermost module whose forward was running when autograd saved it;
parameters and the batch saved for backward are not activations. When the forward cannot
run on fake tensors, the summary has the counts only and says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ModelSummary", "ModuleRow", "summarise"]


@dataclass(frozen=True, slots=True)
class ModuleRow:
    """One module of the summary.

    Attributes:
        module: the module's path (the root module: its class name).
        kind: the module's class name.
        depth: 0 for the root, 1 for its children, and so on.
        parameters: parameter elements of the module and its submodules (shared ones once).
        trainable: those with ``requires_grad``.
        buffers: buffer elements.
        dtype: the parameters' dtype (``"float32"``; several joined by ``+``), or ``None``.
        device: the parameters' device, or ``None``.
        output_shape: the shape of the first tensor the module returned, or ``None``.
        activation_bytes: bytes saved for backward by its forward (submodules included),
            or ``None`` when not measured.
    """

    module: str
    kind: str
    depth: int
    parameters: int
    trainable: int
    buffers: int
    dtype: str | None
    device: str | None
    output_shape: list[int] | None
    activation_bytes: int | None

    def to_fact(self) -> dict[str, Any]:
        """The JSON-ready form (``facts["summary"]`` holds a list of these)."""
        return {
            "module": self.module,
            "type": self.kind,
            "depth": self.depth,
            "parameters": self.parameters,
            "trainable": self.trainable,
            "buffers": self.buffers,
            "dtype": self.dtype,
            "device": self.device,
            "output_shape": self.output_shape,
            "activation_bytes": self.activation_bytes,
        }


@dataclass(frozen=True, slots=True)
class ModelSummary:
    """Rows (root first, in module order), shared parameters, and why shapes are missing.

    Attributes:
        rows: one row per module.
        shared: the names of each parameter held under several names.
        note: why output shapes and activations are missing, or ``None``.
    """

    rows: tuple[ModuleRow, ...]
    shared: tuple[tuple[str, ...], ...]
    note: str | None = None

    def to_facts(self) -> dict[str, Any]:
        """``summary`` (the rows) and, when there are any, ``shared_parameters`` and
        ``summary_note``."""
        facts: dict[str, Any] = {"summary": [row.to_fact() for row in self.rows]}
        if self.shared:
            facts["shared_parameters"] = [list(names) for names in self.shared]
        if self.note:
            facts["summary_note"] = self.note
        return facts


def summarise(model: Any, batch: Any = None, loss_fn: Any = None) -> ModelSummary:
    """Summarise ``model``; with ``batch`` (a :class:`~torchdoctor.preflight.batch.Batch`),
    also measure output shapes and activation memory on a fake copy.

    The user's model is not run: only its copy is.
    """
    shapes: dict[str, Any] = {}
    activations: dict[str, int] | None = None
    note = None
    if batch is not None:
        shapes, activations, note = _measure(model, batch)
    modules = list(model.named_modules())
    rows = tuple(_row(path, module, model, shapes, activations) for path, module in modules)
    return ModelSummary(rows, _shared(model), note)


def _measure(model: Any, batch: Any) -> tuple[dict[str, Any], dict[str, int] | None, str | None]:
    from torchdoctor.preflight.memory import LiveBytes
    from torchdoctor.preflight.memory_step import NotMeasurable, fake_copy, measure_forward
    from torchdoctor.preflight.process import ProcessState

    process = ProcessState()
    try:
        copy = fake_copy(model, None, None, batch)
        tracker = LiveBytes()
        shapes, activations = measure_forward(copy, tracker, copy.batch)
        return shapes, activations, None
    except NotMeasurable as error:
        return {}, None, f"output shapes and activations not measured: {error}"
    except Exception as error:  # noqa: BLE001 - the user's forward on fake tensors
        return (
            {},
            None,
            (
                f"output shapes and activations not measured: the forward "
                f"failed on fake tensors ({type(error).__name__}: {error})"
            ),
        )
    finally:
        process.restore()


def _row(
    path: str, module: Any, model: Any, shapes: dict[str, Any], activations: dict[str, int] | None
) -> ModuleRow:
    params = list(module.parameters())
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in params})
    devices = sorted({str(p.device) for p in params})
    saved = None
    if activations is not None:
        prefix = f"{path}." if path else ""
        saved = sum(
            size for name, size in activations.items() if name == path or name.startswith(prefix)
        )
    return ModuleRow(
        module=path or type(model).__name__,
        kind=type(module).__name__,
        depth=path.count(".") + 1 if path else 0,
        parameters=sum(p.numel() for p in params),
        trainable=sum(p.numel() for p in params if p.requires_grad),
        buffers=sum(b.numel() for b in module.buffers()),
        dtype="+".join(dtypes) or None,
        device="+".join(devices) or None,
        output_shape=shapes.get(path),
        activation_bytes=saved,
    )


def _shared(model: Any) -> tuple[tuple[str, ...], ...]:
    names: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    return tuple(tuple(group) for group in names.values() if len(group) > 1)
