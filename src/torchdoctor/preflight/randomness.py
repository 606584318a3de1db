"""Which random operations a forward runs, in which module, at which line of the user's code.

:func:`record_random_calls` runs one eval-mode forward under a ``TorchFunctionMode`` that
sees every torch function and tensor method call, and keeps those that draw random numbers
(dropout that is on, ``torch.rand*``, ``bernoulli``, ``normal_``, ...) with the innermost
module running and the innermost frame of the user's own code.
"""

from __future__ import annotations

import inspect
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchdoctor.preflight.failures import call_user, user_frame
from torchdoctor.preflight.tracing import ForwardTrace

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

__all__ = ["RandomCall", "record_random_calls"]

# Functionals that are random only when their ``training`` argument is true.
_SWITCHED = frozenset(
    {
        "dropout",
        "alpha_dropout",
        "feature_alpha_dropout",
        "dropout1d",
        "dropout2d",
        "dropout3d",
        "rrelu",
    }
)
_ALWAYS = frozenset(
    {
        "rand",
        "randn",
        "randint",
        "rand_like",
        "randn_like",
        "randint_like",
        "randperm",
        "normal",
        "bernoulli",
        "multinomial",
        "poisson",
        "gumbel_softmax",
        "native_dropout",
        "bernoulli_",
        "normal_",
        "uniform_",
        "random_",
        "exponential_",
        "geometric_",
        "cauchy_",
        "log_normal_",
        "rrelu_",
    }
)
_LIMIT = 20  # calls kept; a forward drawing more than this is already well explained


@dataclass(frozen=True, slots=True)
class RandomCall:
    """One random operation seen in a forward.

    Attributes:
        op: the function's name (``dropout``, ``randn_like``).
        description: how it was called, for messages (``F.dropout(p=0.5, training=True)``).
        module: path of the innermost module running ("" for the root).
        path: the user's file that called it, when found.
        line: the line in that file.
        snippet: that line's text.
        dropout: whether it is a dropout (so the fix is ``training=self.training``).
    """

    op: str
    description: str
    module: str
    path: str | None
    line: int | None
    snippet: str | None
    dropout: bool


def _describe(func: Any, name: str, args: Any, kwargs: dict[str, Any]) -> tuple[str, bool]:
    """The call as text and whether it draws random numbers at all."""
    if name not in _SWITCHED:
        owner = "Tensor." if name.endswith("_") and name != "rrelu_" else "torch."
        return f"{owner}{name}", True
    try:
        bound = inspect.signature(func).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return f"F.{name}", True
    bound.apply_defaults()
    training = bool(bound.arguments.get("training", True))
    p = bound.arguments.get("p")
    shown = f"p={p}, " if p is not None else ""
    return f"F.{name}({shown}training={training})", training


def _recorder(trace: ForwardTrace, calls: list[RandomCall]) -> Any:
    from torch.overrides import TorchFunctionMode

    class _RandomCalls(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if (name in _SWITCHED or name in _ALWAYS) and len(calls) < _LIMIT:
                description, random = _describe(func, name, args, kwargs)
                if random:
                    frame = user_frame(traceback.extract_stack()[:-1])
                    calls.append(
                        RandomCall(
                            name,
                            description,
                            trace.current_module or "",
                            frame.filename if frame else None,
                            frame.lineno if frame else None,
                            (frame.line or None) if frame else None,
                            "dropout" in name,
                        )
                    )
            return func(*args, **kwargs)

    return _RandomCalls()


def record_random_calls(ctx: CheckContext) -> list[RandomCall]:
    """The random operations of one eval-mode, no-grad forward of the batch, in order."""
    import torch

    calls: list[RandomCall] = []
    trace = ForwardTrace(ctx.model)
    ctx.model.eval()
    with torch.no_grad(), trace, _recorder(trace, calls):
        call_user("the model's forward", ctx.batch.call, ctx.model)
    return calls
