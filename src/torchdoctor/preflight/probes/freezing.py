"""Freezing that freezes nothing: ``module.requires_grad = False`` (TD221); freezing that
freezes the wrong layer: the output layer, fresh and random, frozen (TD226).

``requires_grad`` is a flag of tensors; on an ``nn.Module`` assigning it only adds a plain
attribute, and every parameter under the module keeps training. ``requires_grad_(False)``
is the method that freezes them. The probe reads the modules' own attributes, so it
costs nothing and runs no code of the user's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Location
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.frozen_layers import at_default_init, frozen_output_layer

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


@probe("TD226")
def output_layer_frozen_at_init(ctx: CheckContext, out: Reporter) -> None:
    """TD226: the layer that computes the loss's input has no trainable parameter, still
    holds its random initialisation, and other parameters train."""
    path = ctx.train_pass.loss_input_module
    if path is None:
        return
    layer = dict(ctx.model.named_modules()).get(path)
    verdict = frozen_output_layer(ctx.model, layer, ctx.name(path)) if layer is not None else None
    if verdict is None:
        return
    out.emit(
        finding(
            "TD226",
            verdict.message(),
            Location(object=verdict.name),
            Depth.CHECK,
            fix_hint=verdict.fix_hint(),
            evidence=verdict.evidence(),
        )
    )
