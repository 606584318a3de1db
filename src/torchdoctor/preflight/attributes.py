"""The plain Python attributes of modules, saved and put back by :class:`Snapshot`.

A forward may change more than parameters and buffers: a temperature annealed each call
(``self.temperature *= 0.9``), a step counter, a cached tensor, a list of past values.
:class:`AttributeState` records every attribute in a module's ``__dict__`` that torch does
not manage itself, and :meth:`AttributeState.restore` rebinds the original objects, puts
the values back into tensors, lists, dicts and sets changed in place, and removes
attributes a forward added. Objects of other types get their reference back but not
their insides (a tokenizer, a config object).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["AttributeState", "attribute_differences"]

_MISSING = object()
# Values that cannot change in place: an equal object is as good as the same one.
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), tuple, frozenset)


def _torch_managed() -> frozenset[str]:
    """Keys of ``Module.__dict__`` that torch owns (parameters, hooks, mode...)."""
    import torch

    return frozenset(vars(torch.nn.Module())) | {"_compiled_call_impl"}


@dataclass(frozen=True, slots=True)
class _Saved:
    """One attribute: the object that was bound and, for mutable kinds, a copy of it."""

    module: Any
    name: str
    original: Any
    contents: Any  # a copy of the value for tensors, arrays and containers; else _MISSING


def _contents(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, dict, set, bytearray)):
        return value.copy()
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.ndarray):
        return value.copy()
    return _MISSING


def _put_back(saved: _Saved) -> None:
    """Write the saved contents into the original object when they differ."""
    value, contents = saved.original, saved.contents
    if contents is _MISSING or _same(value, contents):
        return
    if isinstance(value, list):
        value[:] = contents
    elif isinstance(value, (dict, set)):
        value.clear()
        value.update(contents)
    elif isinstance(value, bytearray):
        value[:] = contents
    elif hasattr(value, "copy_") and value.shape == contents.shape:
        value.detach().copy_(contents)
    elif hasattr(value, "shape") and value.shape == contents.shape:
        value[...] = contents  # a numpy array
    else:  # a tensor whose shape changed in place (resize_): the copy takes its place
        setattr(saved.module, saved.name, contents)


class AttributeState:
    """The non-torch attributes of a set of modules (see the module doc)."""

    def __init__(self, modules: list[Any]) -> None:
        import torch

        managed = _torch_managed()
        self._modules = modules
        with torch.no_grad():
            self._saved = [
                _Saved(module, name, value, _contents(value))
                for module in modules
                for name, value in vars(module).items()
                if name not in managed
            ]
        self._names = {id(m): {s.name for s in self._saved if s.module is m} for m in modules}
        self._managed = managed

    def restore(self) -> None:
        """Rebind every attribute, refill mutable ones, drop the ones added since."""
        import torch

        for module in self._modules:
            known = self._names[id(module)]
            for name in [n for n in vars(module) if n not in self._managed and n not in known]:
                del module.__dict__[name]
        with torch.no_grad():
            for saved in self._saved:
                saved.module.__dict__[saved.name] = saved.original
                _put_back(saved)


def _same(first: Any, second: Any) -> bool:
    import torch

    if _same_items(first, second):
        return True  # a container holding the very same objects (no value compared)

    if isinstance(first, torch.Tensor) or isinstance(second, torch.Tensor):
        return (
            isinstance(first, torch.Tensor)
            and isinstance(second, torch.Tensor)
            and first.shape == second.shape
            and first.dtype == second.dtype
            and bool(torch.equal(first.detach(), second.detach()))
        )
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(first, numpy.ndarray):
        return bool(numpy.array_equal(first, second, equal_nan=first.dtype.kind in "fc"))
    try:
        return bool(first == second)
    except Exception:  # noqa: BLE001 - objects that cannot compare (tensors inside a list)
        return first is second


def _same_items(first: Any, second: Any) -> bool:
    if isinstance(first, list) and isinstance(second, list):
        return len(first) == len(second) and all(a is b for a, b in zip(first, second, strict=True))
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(first[k] is second[k] for k in first)
    return False


def attribute_differences(before: AttributeState, after: AttributeState) -> list[str]:
    """What differs between two records of the same modules' attributes (for tests)."""
    old = {(id(s.module), s.name): s for s in before._saved}
    new = {(id(s.module), s.name): s for s in after._saved}
    problems = []
    for key in sorted(old.keys() | new.keys(), key=lambda k: k[1]):
        first, second = old.get(key), new.get(key)
        if first is None or second is None:
            some = first or second
            assert some is not None
            problems.append(
                f"attribute {type(some.module).__name__}.{some.name} "
                f"{'added' if first is None else 'removed'}"
            )
            continue
        label = f"attribute {type(first.module).__name__}.{first.name}"
        if not _same(first.original, second.original):
            problems.append(f"{label}: {first.original!r} then {second.original!r}")
        elif first.original is not second.original and not isinstance(first.original, _IMMUTABLE):
            problems.append(f"{label}: a different object")
        elif first.contents is not _MISSING and not _same(first.contents, second.contents):
            problems.append(f"{label}: contents differ")
    return problems
