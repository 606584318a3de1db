"""The output layer frozen at its random initialisation (TD226), as one verdict that
``check`` (on its training pass) and ``run`` (on the loss graphs of the first steps) both
ask. Light to import: it needs torch only when called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FrozenOutputLayer", "at_default_init", "frozen_output_layer"]


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


@dataclass(frozen=True, slots=True)
class FrozenOutputLayer:
    """The verdict: ``layer`` computes the loss's input, is frozen at its initial draw,
    and ``trainable`` other parameters of the model train."""

    name: str
    kind: str
    frozen: int
    trainable: int

    def message(self) -> str:
        """The finding's message, the same at every depth."""
        return (
            f"`{self.name}` ({self.kind}) computes the loss's input but all its "
            f"{self.frozen} parameters are frozen, and its weight is still the random draw "
            f"of its initialiser: the {self.trainable} parameters that train can only adapt "
            "to a fixed random projection, and accuracy stays near chance."
        )

    def fix_hint(self) -> str:
        """The finding's fix hint."""
        return (
            f"Freeze before replacing the head, or call `{self.name.split('.')[-1]}"
            ".requires_grad_(True)` after freezing, and pass its parameters to the optimizer."
        )

    def evidence(self) -> dict[str, Any]:
        """The finding's evidence."""
        return {"layer": self.name, "frozen_parameters": self.frozen, "trainable": self.trainable}


def frozen_output_layer(model: Any, layer: Any, name: str) -> FrozenOutputLayer | None:
    """The verdict on ``layer``, the module whose output the loss takes, inside ``model``:
    ``None`` unless all its parameters are frozen, its weight is still at its default
    initialisation, and some other parameter of ``model`` trains (a model frozen whole is
    not a wiring this rule can tell)."""
    params = list(layer.parameters())
    if not params or any(p.requires_grad for p in params) or not at_default_init(layer):
        return None
    trainable = sum(1 for p in model.parameters() if p.requires_grad)
    if not trainable:
        return None
    return FrozenOutputLayer(name, type(layer).__name__, len(params), trainable)
