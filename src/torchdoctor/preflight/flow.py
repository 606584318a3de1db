"""How the gradient flows in the shared training pass: vanishing gradients and dead ReLU
units, measured once for the probes that report them (TD215, TD217) and for the
overfit test, which names them as the reason a model cannot fit its batch (TD605)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext
    from torchdoctor.preflight.tracing import ReluSite

__all__ = ["Vanishing", "dead_relu_sites", "vanishing"]

# Earliest-to-latest gradient ratio below which gradients vanish (a healthy network stays
# within a factor of about 100 either way at initialisation).
VANISHING_RATIO = 1e-4
MIN_LAYERS_FOR_VANISHING = 4
# A ReLU site counts as dead when at least this share of its units never fired.
DEAD_FRACTION = 0.5
MIN_RELU_UNITS = 4
MIN_RELU_OBSERVATIONS = 8
_NO_VANISHING = ("Embedding", "EmbeddingBag")


@dataclass(frozen=True, slots=True)
class Vanishing:
    """The first and last layers' gradient RMS, when the first is far below the last."""

    first: str
    first_rms: float
    last: str
    last_rms: float
    layers: int

    @property
    def ratio(self) -> float:
        """First layer's RMS over the last's."""
        return self.first_rms / self.last_rms


def _rms(tensor: Any) -> float:
    return float(tensor.detach().float().pow(2).mean().sqrt())


def _layer_gradients(ctx: CheckContext) -> list[tuple[str, float]]:
    """(weight name, gradient RMS) of each layer with a weight matrix, in forward order."""
    grads = ctx.train_pass.gradients
    layers = []
    for path in ctx.train_pass.trace.order:
        module = ctx.model.get_submodule(path)
        if type(module).__name__ in _NO_VANISHING:
            continue  # only the looked-up rows get a gradient
        for name, param in module.named_parameters(recurse=False):
            full = f"{path}.{name}" if path else name
            grad = grads.get(full)
            if param.dim() >= 2 and grad is not None:
                layers.append((full, _rms(grad)))
                break
    return layers


def vanishing(ctx: CheckContext) -> Vanishing | None:
    """The vanishing gradients of the shared pass, or ``None`` when they flow (or when
    there is no finite gradient to compare: other rules report that)."""
    train_pass = ctx.train_pass
    if train_pass.loss_error is not None or train_pass.backward_error is not None:
        return None
    if not bool(train_pass.loss.isfinite().all()):
        return None
    layers = _layer_gradients(ctx)
    if len(layers) < MIN_LAYERS_FOR_VANISHING:
        return None
    (first, low), (last, high) = layers[0], layers[-1]
    if not (math.isfinite(low) and math.isfinite(high)) or high == 0 or low == 0:
        return None  # no gradient at all is TD211's
    found = Vanishing(first, low, last, high, len(layers))
    return found if found.ratio < VANISHING_RATIO else None


def dead_relu_sites(ctx: CheckContext) -> list[ReluSite]:
    """ReLU sites of the shared pass where most units output zero for the whole batch."""
    return [
        site
        for site in ctx.train_pass.trace.relu_sites.values()
        if site.units >= MIN_RELU_UNITS
        and site.observations >= MIN_RELU_OBSERVATIONS
        and site.units - int(site.alive.sum()) >= DEAD_FRACTION * site.units
    ]
