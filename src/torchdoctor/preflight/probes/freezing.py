"""Freezing that freezes nothing: ``module.requires_grad = False`` (TD221).

``requires_grad`` is a flag of tensors; on an ``nn.Module`` assigning it only adds a plain
attribute, and every parameter under the module keeps training. ``requires_grad_(False)``
is the method that freezes them. The probe reads the modules' own attributes, so it
costs nothing and runs no code of the user's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchdoctor.findings import Depth, Finding, Location
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

__all__ = ["requires_grad_attribute"]


@probe("TD221")
def requires_grad_attribute(ctx: CheckContext) -> Iterator[Finding]:
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
        yield finding(
            "TD221",
            f"`{name}.requires_grad = False` set a plain attribute on the module "
            f"({type(module).__name__}): {training} of its {len(params)} parameters still "
            "have `requires_grad=True`, get gradients and train. The module is not frozen.",
            Location(object=name),
            Depth.CHECK,
            fix_hint=f"Call `{name.split('.')[-1] or 'module'}.requires_grad_(False)` (the "
            "method, with an underscore), which sets the flag on every parameter.",
            evidence={"module": name, "trainable_parameters": training, "parameters": len(params)},
        )
