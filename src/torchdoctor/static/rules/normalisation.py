"""Normalisation layers built with the wrong argument: TD505 momentum-passed-as-eps.

``nn.BatchNorm2d(128, 0.8)`` reads as "momentum 0.8" to anyone who knows Keras's
``BatchNormalization(momentum=0.8)``, but torch's second positional parameter is ``eps``:
the layer divides by ``sqrt(var + 0.8)``. A value that large is never a deliberate eps
(torch's default is 1e-5, TensorFlow's 1e-3), and a variable named for the momentum in
that slot says the same. Keyword arguments are never judged: ``eps=0.1`` is a choice.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import last_name
from torchdoctor.static.rules.base import LintRule

_LARGEST_EPS = 0.05  # eps values in real code stay far below; momenta are 0.1 to 0.999
_MOMENTUM_WORDS = ("momentum", "mom", "decay")


@detector("TD505", depth=Depth.LINT)
class MomentumPassedAsEps(LintRule):
    """A second positional argument of a BatchNorm/InstanceNorm that is a momentum."""

    requires = ("Norm",)
    call_names = frozenset(name.rpartition(".")[2] for name in torchapi.EPS_BEFORE_MOMENTUM)

    def visit_call(self, node: ast.Call) -> None:
        if len(node.args) < 2 or any(isinstance(a, ast.Starred) for a in node.args[:2]):
            return
        layer = self.ctx.qualified_name(node.func)
        if layer not in torchapi.EPS_BEFORE_MOMENTUM:
            return
        argument = node.args[1]
        meaning = _named_for(argument)
        if meaning == "eps":
            return
        value = self._number(argument)
        named = last_name(argument) if meaning == "momentum" else None
        if named is None and (value is None or value < _LARGEST_EPS):
            return
        text = self.ctx.segment(argument)
        said = f"`{named}`" if named is not None else f"{text}"
        short = layer.rpartition(".")[2]
        self.report(
            argument,
            f"`{short}(...)` gets {said} as its second positional argument, which is `eps`, "
            f"not `momentum`: the layer normalises by sqrt(var + {text}), which shrinks "
            f"every channel whose variance is not far above it, and keeps the default "
            f"momentum 0.1",
            fix_hint=f"Pass it by keyword: `momentum={text}` (torch's momentum weighs the "
            f"new batch: Keras's momentum m is torch's 1 - m), or `eps={text}` if that "
            f"epsilon is really meant.",
            evidence={"layer": short, "eps": value if value is not None else text},
        )

    def _number(self, expr: ast.expr) -> float | None:
        """A numeric literal, directly or through a name bound once to one."""
        if isinstance(expr, ast.Name):
            binding = self.ctx.binding(expr)
            expr = binding.value if binding is not None and binding.value is not None else expr
        if isinstance(expr, ast.Constant):
            number = expr.value
            if isinstance(number, (int, float)) and not isinstance(number, bool):
                return float(number)
        return None


def _named_for(expr: ast.expr) -> str | None:
    """``"eps"`` or ``"momentum"`` when a variable or attribute's name says which it holds."""
    words = last_name(expr).lower().split("_")
    if "eps" in words or "epsilon" in words:
        return "eps"
    return "momentum" if any(word in _MOMENTUM_WORDS for word in words) else None
