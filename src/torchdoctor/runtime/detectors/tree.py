"""Walking a model's modules cheaply, for checks that run at every sampled step.

``named_modules()`` and ``parameters()`` are nested generators that build a dotted name
for every module; a check that only needs the modules (or their parameters) reads the
modules' own dicts instead, at a fraction of the cost. The order and the de-duplication
are ``named_modules()``'s: depth first, parents before children, a module registered
twice (shared, or a link back to a parent) once, at its first place.
"""

from __future__ import annotations

from functools import partial
from itertools import chain
from operator import attrgetter, is_not, methodcaller
from typing import Any

__all__ = ["forget", "parameters_in", "submodules", "submodules_at"]

# The last step's walks: (its StepEvent, {id(root): modules}). Several detectors walk the
# same models at the same sampled step; the tree does not change inside one step.
_walks: list[Any] = [None, {}]


def submodules(root: Any) -> list[Any]:
    """``list(root.modules())``, without the generators."""
    try:
        found: dict[int, Any] = {}  # by id(), in the order found
        stack = [root]
        pop, push = stack.pop, stack.extend
        while stack:
            module = pop()
            key = id(module)
            if key in found:
                continue
            found[key] = module
            children = module._modules
            if children:  # popped first to last; a slot registered as None is skipped
                push(filter(_not_none, reversed(children.values())))
        return list(found.values())
    except (AttributeError, TypeError):  # not a plain nn.Module tree
        return list(root.modules())


def submodules_at(event: Any, root: Any) -> list[Any]:
    """:func:`submodules` of ``root`` at the step of ``event`` (a ``StepEvent``): walked
    once per step, whichever detector asks first. Callers must not change the list."""
    if _walks[0] is not event:
        _walks[0], _walks[1] = event, {}
    walks: dict[int, list[Any]] = _walks[1]
    found = walks.get(id(root))
    if found is None:
        found = walks[id(root)] = submodules(root)
    return found


def forget() -> None:
    """Drop the cached walk (the run is over: it holds the user's modules)."""
    _walks[0], _walks[1] = None, {}


def parameters_in(modules: list[Any]) -> list[Any]:
    """The parameters the modules hold themselves, in order; one shared by two modules
    comes twice (``parameters()`` gives it once). Read in C: it runs at sampled steps."""
    held = map(_values, map(_own_parameters, modules))
    return list(filter(_not_none, chain.from_iterable(held)))


_not_none = partial(is_not, None)  # a slot registered as None holds nothing
_own_parameters = attrgetter("_parameters")
_values = methodcaller("values")
