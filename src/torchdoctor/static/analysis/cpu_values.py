"""Whether a value a program saves holds only CPU data, read from its syntax.

One answer for two readers: TD901's own-file saves (names read through the file's
bindings) and :mod:`.weight_saves`' program-wide saves (other modules' text, names bound
once). A value is on the CPU when it is moved there (``.cpu()``, ``.to("cpu")``,
``.to(torch.device("cpu"))``), made there (``torch.tensor(data)`` without ``device=``, a
random-number generator's state, which is a CPU byte tensor even for CUDA generators),
holds no tensor (numbers, text, a dataset mapped or filtered by a function), or is a
container, comprehension or ``isinstance``-guarded choice of those.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from torchdoctor.static.analysis.calls import last_name

__all__ = ["RNG_GETTERS", "RNG_SETTERS", "holds_cpu_data", "rng_call"]

# Setters of random-number-generator states, and the getters whose states they take.
RNG_SETTERS = frozenset({"set_rng_state", "set_rng_state_all", "setstate", "set_state"})
RNG_GETTERS = frozenset({"get_rng_state", "get_rng_state_all", "getstate", "get_state"})

# Dataset methods that take a function and return a dataset (Hugging Face datasets,
# torchdata pipes): tensors have no such methods.
_DATASET_STEPS = frozenset({"map", "filter"})

# Names are followed this many bindings deep.
_DEPTH = 3


def rng_call(func: ast.expr, names: frozenset[str]) -> bool:
    """A generator's getter or setter; the generic ``get_state``/``set_state`` count only
    on a ``random`` receiver (``np.random.get_state()``, not ``env.get_state()``)."""
    name = last_name(func)
    if name not in names:
        return False
    if name in ("get_state", "set_state"):
        return isinstance(func, ast.Attribute) and last_name(func.value) == "random"
    return True


def holds_cpu_data(
    value: ast.expr,
    resolve: Callable[[ast.Name], ast.expr | None],
    made_on_host: Callable[[ast.Call], bool],
    depth: int = 0,
) -> bool:
    """Everything in ``value`` is on the CPU. ``resolve`` gives the value a name was bound
    to (``None`` when unknown); ``made_on_host`` says whether a call is ``torch.tensor``,
    ``torch.from_numpy`` or ``torch.as_tensor`` as the caller resolves names."""

    def on_cpu(node: ast.expr, level: int = depth) -> bool:
        return holds_cpu_data(node, resolve, made_on_host, level)

    if isinstance(value, ast.Constant | ast.JoinedStr):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        if rng_call(func, RNG_GETTERS):
            return True
        if made_on_host(value) and not any(k.arg == "device" for k in value.keywords):
            return True  # `torch.tensor(coef)` of NumPy data: made on the CPU
        if not isinstance(func, ast.Attribute):
            return False
        if func.attr in _DATASET_STEPS and value.args:
            return True
        if func.attr == "cpu" or (func.attr == "to" and any(_says_cpu(a) for a in value.args)):
            return True
        return isinstance(func.value, ast.Call) and on_cpu(func.value)  # m.cpu().state_dict()
    if isinstance(value, ast.Dict):
        return all(on_cpu(v) for v in value.values)
    if isinstance(value, ast.List | ast.Tuple):
        return all(on_cpu(e) for e in value.elts)
    if isinstance(value, ast.DictComp):
        return on_cpu(value.value)
    if isinstance(value, ast.ListComp):
        return on_cpu(value.elt)
    if isinstance(value, ast.IfExp):
        if _tests_for_a_tensor(value.test):  # `v.cpu() if isinstance(v, Tensor) else v`
            return on_cpu(value.body)
        return on_cpu(value.body) and on_cpu(value.orelse)
    if isinstance(value, ast.Name) and depth < _DEPTH:
        bound = resolve(value)
        return bound is not None and on_cpu(bound, depth + 1)
    return False


def _says_cpu(node: ast.expr) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    if isinstance(node, ast.Call) and node.args:
        node = node.args[0]
    return isinstance(node, ast.Constant) and node.value == "cpu"


def _tests_for_a_tensor(test: ast.expr) -> bool:
    """``isinstance(v, torch.Tensor)``: the other arm of the test holds no tensor."""
    return (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "isinstance"
        and len(test.args) == 2
        and "Tensor" in ast.unparse(test.args[1])
    )
