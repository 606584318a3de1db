"""Naming and locating parts of a model for findings: module groups and definition lines.

Shared by the detectors that report about parameters: a set of parameters is collapsed to
the largest modules it covers entirely (``aux_head`` rather than ``aux_head.0.weight``,
``aux_head.0.bias``, ...), and a module is located at the line that assigns it
(``self.aux_head = ...`` in its parent's class, or ``model.fc = ...`` in the script).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from torchdoctor.findings import Location
from torchdoctor.runtime.detectors.base import CallSite, ModelInfo, MonitorView, OptimizerInfo

__all__ = [
    "assignment_location",
    "describe_params",
    "display_path",
    "group_by_module",
    "owner_name",
    "param_name",
    "script_assignment_location",
]


def param_name(monitor: MonitorView, info: OptimizerInfo, index: int) -> str:
    """The display name of an optimizer's ``index``-th parameter (``encoder.0.weight``).

    ``info.names`` is fixed when the optimizer is first seen, which can be before its
    model is (L-BFGS runs the model's first forward inside ``step()``): the model known
    now is asked first, and ``param[7]`` remains only for parameters of no known model.
    """
    name = monitor.param_name(info.params[index]) or info.names[index]
    if name.startswith("param["):
        name = owner_name(info.params[index]) or name
    return name


def owner_name(param: Any) -> str | None:
    """``Layer.weight``: the class and attribute of the module holding ``param``, for a
    module no model known to the monitor contains (layers kept in a plain list and called
    through their ``forward``). One pass over the live objects: for reports only."""
    import gc

    import torch

    module_type = torch.nn.Module
    for obj in gc.get_objects():
        # type(), not isinstance(): a lazy module proxy answering `__class__` may warn
        if issubclass(type(obj), module_type):
            for name, value in obj._parameters.items():
                if value is param:
                    return f"{type(obj).__name__}.{name}"
    return None


def group_by_module(model: Any, params: Iterable[Any]) -> list[tuple[str, list[str]]]:
    """Collapse parameters of ``model`` into ``(path, parameter names)`` groups.

    A module is a group when every parameter under it that requires grad is in
    ``params``; parameters not covered by such a module form groups of their own.
    Paths are relative to ``model``; the root itself is the path ``""``.
    """
    params = list(params)
    chosen = {id(p) for p in params}
    names = {id(p): name for name, p in model.named_parameters()}
    groups: list[tuple[str, list[str]]] = []
    covered: set[int] = set()
    for path, module in model.named_modules():  # parents come before their children
        if any(_inside(path, group) for group, _ in groups):
            continue
        own = [p for p in module.parameters() if p.requires_grad]
        if own and all(id(p) in chosen for p in own):
            groups.append((path, [names[id(p)] for p in own if id(p) in names]))
            covered.update(id(p) for p in own)
    for param in params:  # in the caller's order, so reports read in model order
        key = id(param)
        if key not in covered and key in names:
            covered.add(key)
            groups.append((names[key], [names[key]]))
    return groups


def _inside(path: str, group: str) -> bool:
    return group == "" or path == group or path.startswith(group + ".")


def describe_params(
    monitor: MonitorView, params: Iterable[Any], limit: int = 4
) -> tuple[str, list[str]]:
    """Readable text for a set of parameters, collapsed to modules, plus the group names.

    ``"`encoder.0` (2 parameters), `head.weight`"``; a whole model reads
    ``"every parameter of `Net`"``.
    """
    by_model: dict[int, tuple[ModelInfo, list[Any]]] = {}
    loose: list[str] = []
    for param in params:
        model = monitor.model_of(param)
        if model is None:
            loose.append(monitor.param_name(param) or "a parameter")
        else:
            by_model.setdefault(id(model), (model, []))[1].append(param)
    texts, names = [], []
    for model, group in by_model.values():
        for path, members in group_by_module(model.inner, group):
            shown = display_path(monitor, model, path)
            names.append(shown)
            if not path:
                texts.append(f"every parameter of `{shown}`")
            else:
                extra = f" ({len(members)} parameters)" if len(members) > 1 else ""
                texts.append(f"`{shown}`{extra}")
    names += loose
    texts += [f"`{n}`" for n in loose]
    more = f" and {len(texts) - limit} more" if len(texts) > limit else ""
    return ", ".join(texts[:limit]) + more, names


def display_path(monitor: MonitorView, model: ModelInfo, path: str) -> str:
    """A module or parameter path of ``model`` as shown in reports (label included)."""
    owner, _, leaf = path.rpartition(".")
    try:
        module = model.inner.get_submodule(path)
        suffix = ""
    except AttributeError:
        module = model.inner.get_submodule(owner) if owner else model.inner
        suffix = leaf
    base = monitor.module_path(module) or ""
    if suffix:
        return f"{base}.{suffix}" if base else suffix
    return base or model.label


def assignment_location(monitor: MonitorView, model: ModelInfo, path: str) -> Location | None:
    """Where the module at ``path`` is assigned, in the user's code, with its display path.

    Looks for ``self.<name> =`` in the parent module's class, then for ``.<name> =`` in
    the script (:func:`script_assignment_location` looks there alone). A parameter of a
    library layer (``norm.weight`` of a ``LayerNorm``) is placed where that layer is
    assigned. ``None`` when nothing is found in user code.
    """
    shown = display_path(monitor, model, path)
    for candidate in (path, path.rpartition(".")[0]):
        site = _assignment_site(monitor, model, candidate)
        if site is not None:
            return site.location(object=shown)
    return None


def script_assignment_location(
    monitor: MonitorView, model: ModelInfo, path: str
) -> Location | None:
    """Where the script itself assigns the module at ``path`` (``model.head = ...``, a
    layer replaced after the model was built), or ``None``."""
    attribute = path.rpartition(".")[2]
    if not attribute.isidentifier():
        return None
    site = _in_script(monitor.script, attribute)
    if site is None or not monitor.is_user_file(site.path):
        return None
    return site.location(object=display_path(monitor, model, path))


def _assignment_site(monitor: MonitorView, model: ModelInfo, path: str) -> CallSite | None:
    owner_path, _, attribute = path.rpartition(".")
    if not attribute or not attribute.isidentifier():
        return None
    try:
        owner = model.inner.get_submodule(owner_path) if owner_path else model.inner
    except AttributeError:
        return None
    for site in (_in_class(type(owner), attribute), _in_script(monitor.script, attribute)):
        if site is not None and monitor.is_user_file(site.path):
            return site
    return None


def _in_class(cls: type, attribute: str) -> CallSite | None:
    """The ``self.<attribute> = ...`` line in the methods of ``cls`` (``__init__`` first).

    Methods are read through their code objects, which keep their file: a class defined in
    a script run by ``torchdoctor run`` cannot be found through ``sys.modules["__main__"]``
    once runpy has put the original ``__main__`` back.
    """
    methods = [value for value in vars(cls).values() if inspect.isfunction(value)]
    methods.sort(key=lambda method: method.__name__ != "__init__")
    pattern = re.compile(rf"\bself\.{re.escape(attribute)}\s*(:[^=]+)?=(?!=)")
    for method in methods:
        try:
            lines, first = inspect.getsourcelines(method)
        except (OSError, TypeError):
            continue
        path = method.__code__.co_filename
        for offset, text in enumerate(lines):
            if pattern.search(text):
                return CallSite(str(Path(path).resolve()), first + offset, cls.__name__, True)
    return None


def _in_script(script: Path | None, attribute: str) -> CallSite | None:
    if script is None:
        return None
    try:
        text = script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    pattern = re.compile(rf"\w\.{re.escape(attribute)}\s*=(?!=)")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.search(line) and not line.lstrip().startswith(("#", "self.")):
            return CallSite(str(script.resolve()), number, "<module>", True)
    return None
