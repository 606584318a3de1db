"""Freezing that freezes nothing: ``module.requires_grad = False`` (TD221); freezing that
freezes the wrong layer: the output layer, fresh and random, frozen (TD226).

``requires_grad`` is a flag of tensors; on an ``nn.Module`` assigning it only adds a plain
attribute, and every parameter under the module keeps training. ``requires_grad_(False)``
is the method that freezes them. The probe reads the modules' own attributes, so it
costs nothing and runs no code of the user's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Location
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

__all__ = ["at_default_init", "output_layer_frozen_at_init", "requires_grad_attribute"]


@probe("TD221")
def requires_grad_attribute(ctx: CheckContext, out: Reporter) -> None:
    """TD221: a module whose ``requires_grad`` is a plain attribute, not its parameters'."""
    for path, module in ctx.model.named_modules():
        flag = module.__dict__.get("requires_grad")
        if not isinstance(flag, bool):
            continue
        params = list(module.parameters())
        training = sum(p.requires_grad for p in params)
        if flag or not training:
            continue  # `= True` on a trainable module, or frozen properly as well
        name = ctx.name(path)
        out.emit(
            finding(
                "TD221",
                f"`{name}.requires_grad = False` set a plain attribute on the module "
                f"({type(module).__name__}): {training} of its {len(params)} parameters still "
                "have `requires_grad=True`, get gradients and train. The module is not frozen.",
                Location(object=name),
                Depth.CHECK,
                fix_hint=f"Call `{name.split('.')[-1] or 'module'}.requires_grad_(False)` (the "
                "method, with an underscore), which sets the flag on every parameter.",
                evidence={
                    "module": name,
                    "trainable_parameters": training,
                    "parameters": len(params),
                },
            )
        )


# --- TD226: the output layer frozen at its random initialisation ----------------------------


def at_default_init(module: Any) -> bool:
    """Whether a ``Linear`` or convolution's weight still looks drawn by torch's default
    initialiser: uniform within ``±1/sqrt(fan_in)``, its spread that of such a draw.

    Trained or loaded weights leave that bound or that spread; a weight of fewer than 64
    values is too small to tell.
    """
    import math

    import torch
    from torch import nn

    weight = getattr(module, "weight", None)
    if not isinstance(module, (nn.Linear, nn.modules.conv._ConvNd)) or weight is None:
        return False
    if weight.numel() < 64 or weight.dim() < 2 or weight.device.type == "meta":
        return False
    with torch.no_grad():
        values = weight.detach().float()
        bound = 1.0 / math.sqrt(values[0].numel())  # fan_in
        largest = float(values.abs().max())
        spread = float(values.std())
    uniform_spread = bound / math.sqrt(3.0)
    return bound * 0.8 <= largest <= bound * 1.0001 and abs(spread / uniform_spread - 1) < 0.1


@probe("TD226")
def output_layer_frozen_at_init(ctx: CheckContext, out: Reporter) -> None:
    """TD226: the layer that computes the loss's input has no trainable parameter, still
    holds its random initialisation, and other parameters train."""
    path = ctx.train_pass.loss_input_module
    if path is None:
        return
    layer = dict(ctx.model.named_modules()).get(path)
    params = list(layer.parameters()) if layer is not None else []
    if not params or any(p.requires_grad for p in params) or not at_default_init(layer):
        return
    trainable = [n for n, p in ctx.model.named_parameters() if p.requires_grad]
    if not trainable:
        return  # nothing trains at all: not a wiring this rule can tell
    name = ctx.name(path)
    out.emit(
        finding(
            "TD226",
            f"`{name}` ({type(layer).__name__}) computes the loss's input but all its "
            f"{len(params)} parameters are frozen, and its weight is still the random draw of "
            f"its initialiser: the {len(trainable)} parameters that train can only adapt to a "
            "fixed random projection, and accuracy stays near chance.",
            Location(object=name),
            Depth.CHECK,
            fix_hint=f"Freeze before replacing the head, or call `{name.split('.')[-1]}"
            ".requires_grad_(True)` after freezing, and pass its parameters to the optimizer.",
            evidence={"layer": name, "frozen_parameters": len(params), "trainable": len(trainable)},
        )
    )
