"""Plain words for ``torch.compile``'s graph-break and recompilation reasons.

torch's reasons range from cryptic (``generic_jump TensorVariable()`` in torch 2.2) to
long explanations (torch 2.6+). Each entry recognises one family of reasons across those
wordings and says what the user's code did and how to change it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Advice", "graph_break_advice", "recompile_advice"]


@dataclass(frozen=True, slots=True)
class Advice:
    """What a reason means in the user's terms, and the fix."""

    meaning: str
    fix: str


def _a(pattern: str, meaning: str, fix: str) -> tuple[re.Pattern[str], Advice]:
    return re.compile(pattern, re.IGNORECASE | re.DOTALL), Advice(meaning, fix)


_GRAPH_BREAKS = (
    _a(
        r"generic_jump|data-dependent branching|data dependent jump",
        "an `if` or `while` on a tensor's value (data-dependent control flow)",
        "Make the code branchless (`torch.where`, `torch.clamp`), use `torch.cond`, or move "
        "the decision out of the compiled code.",
    ),
    _a(
        r"\bitem\b|Tensor\.item|scalar output",
        "`.item()` (or `float(tensor)`) reads a tensor's value into Python",
        "Keep the value a tensor inside the compiled code, or set "
        "`torch._dynamo.config.capture_scalar_outputs = True`.",
    ),
    _a(
        r"\bprint\b",
        "a `print` call inside the compiled code",
        "Move printing and logging out of `forward` (log after the call), or remove it.",
    ),
    _a(
        r"numpy|\.tolist|tolist\(",
        "a conversion of a tensor to NumPy or a Python list",
        "Do the conversion outside the compiled code.",
    ),
    _a(
        r"dynamic shape operator|nonzero|data-dependent output shape|masked_select",
        "an operation whose output shape depends on the data (`nonzero`, boolean masks)",
        "Replace boolean indexing with `torch.where` / multiplication by the mask, or set "
        "`torch._dynamo.config.capture_dynamic_output_shape_ops = True`.",
    ),
    _a(
        r"skip|disallowed|torch\._dynamo\.disable|marked as skipped",
        "a call to a function torch.compile is told to skip",
        "Move the call out of the compiled code if it is not needed there.",
    ),
)

_RECOMPILES = (
    _a(
        r"size mismatch|stride mismatch|dim\w* mismatch|sizes? .* expected",
        "the input shapes change from call to call",
        "Pad inputs to a few fixed sizes (bucketing), or let the dimension be dynamic: drop "
        "`dynamic=False` or call `torch._dynamo.mark_dynamic(x, dim)`.",
    ),
    _a(
        r"dtype mismatch|dtype",
        "the inputs' dtype changes from call to call",
        "Convert inputs to one dtype before the compiled call.",
    ),
    _a(
        r"requires_grad",
        "inputs switch between requiring grad and not",
        "Call the compiled function with inputs in one autograd state.",
    ),
    _a(
        r"grad_mode|GLOBAL_STATE|global state",
        "grad mode or another global setting switches between calls",
        "Expected once for a train/eval split; otherwise keep the global state stable.",
    ),
    _a(
        r"\btraining\b",
        "the module switches between train and eval mode",
        "Expected once for a train/eval split; compile separate modules if it happens more.",
    ),
    _a(
        r"___check_obj_id|ID_MATCH|id\(|type_id|TYPE_MATCH",
        "an object the compiled code reads is a different instance on each call",
        "Create modules, functions and config objects once, outside the compiled code.",
    ),
    _a(
        r"==|!=|__eq__",
        "a Python number or string the code reads changes on each call and is baked into the graph",
        "Pass changing numbers as tensors (`torch.tensor(value)`), or make them constants.",
    ),
)


def graph_break_advice(reason: str) -> Advice | None:
    """Advice for a graph break's reason text, or ``None`` for an unknown family."""
    return _first(_GRAPH_BREAKS, reason)


def recompile_advice(reason: str) -> Advice:
    """Advice for a guard-failure reason; a general answer for an unknown one."""
    return _first(_RECOMPILES, reason) or Advice(
        "what the compiled code depends on changes between calls",
        "Keep inputs, module state and globals stable between calls; run with "
        "`TORCH_LOGS=recompiles` to print every reason.",
    )


def _first(table: tuple[tuple[re.Pattern[str], Advice], ...], reason: str) -> Advice | None:
    for pattern, advice in table:
        if pattern.search(reason):
            return advice
    return None
