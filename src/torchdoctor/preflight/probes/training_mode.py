"""Probe 5, the mode the model is handed over in: eval mode before training (TD502).

``check`` takes the objects as they are just before the training loop. A model whose
root is in eval mode there (``from_pretrained`` returns ``model.eval()``; a validation
pass left it so) trains with dropout off and BatchNorm frozen at its running statistics,
unless the loop calls ``model.train()`` first. A frozen backbone deliberately put in eval
mode under a training root is not this: only the root's own mode counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Location
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

__all__ = ["handed_over_in_eval_mode"]

_LISTED = 3


def mode_sensitive(module: Any) -> bool:
    """Whether ``module`` computes differently in train and eval mode (dropout, a norm
    layer with running statistics)."""
    from torch import nn

    if isinstance(module, nn.modules.dropout._DropoutNd):
        return module.p > 0
    if isinstance(module, nn.modules.batchnorm._NormBase):
        return bool(module.track_running_stats)
    return False


@probe("TD502")
def handed_over_in_eval_mode(ctx: CheckContext, out: Reporter) -> None:
    """TD502: an optimizer trains a model whose root is in eval mode, with dropout or
    BatchNorm layers that eval mode changes."""
    model = ctx.model
    if ctx.optimizer is None or model.training:
        return
    if not any(p.requires_grad for p in model.parameters()):
        return
    changed = [name for name, m in model.named_modules() if not m.training and mode_sensitive(m)]
    if not changed:
        return
    shown = ", ".join(f"`{ctx.name(name)}`" for name in changed[:_LISTED])
    more = f" and {len(changed) - _LISTED} more" if len(changed) > _LISTED else ""
    out.emit(
        finding(
            "TD502",
            f"{ctx.name('')} is in eval mode while its optimizer is ready to train it: "
            f"{shown}{more} behave as in evaluation (dropout off, BatchNorm frozen at its "
            "running statistics) for every step unless the loop calls `model.train()` first.",
            Location(object=ctx.name("")),
            Depth.CHECK,
            fix_hint="Call `model.train()` at the start of each epoch, before the first step "
            "(`from_pretrained` and validation passes leave the model in eval mode).",
            evidence={"eval_mode_modules": len(changed), "modules": changed[:10]},
        )
    )
