"""Which models and optimizers the run uses, and what their parts are called.

Models are found from the modules that get called (a global forward pre-hook during the
first steps only) or given to ``watch(model=...)``. A *root* is a called module that is not
inside another called module. Wrappers (DDP, DataParallel, ``torch.compile``) are looked
through for names, so paths read ``encoder.layers.3.attn``, as in the user's model.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from torchdoctor.runtime.detectors.base import ModelInfo, OptimizerInfo

if TYPE_CHECKING:
    import torch

__all__ = ["ModelRegistry", "unwrap"]

_WRAPPER_ATTRIBUTES = (
    ("OptimizedModule", "_orig_mod"),
    ("DistributedDataParallel", "module"),
    ("DataParallel", "module"),
)


def unwrap(module: torch.nn.Module) -> torch.nn.Module:
    """The user's model inside DDP / DataParallel / ``torch.compile`` wrappers."""
    for _ in range(8):  # wrappers nest (DDP of a compiled model); bounded on purpose
        inner = None
        for class_name, attribute in _WRAPPER_ATTRIBUTES:
            if type(module).__name__ == class_name:
                inner = getattr(module, attribute, None)
        if inner is None:
            return module
        module = inner
    return module


class ModelRegistry:
    """Root models, optimizers, and the lookup tables from objects to display names."""

    def __init__(self) -> None:
        self.models: list[ModelInfo] = []
        self.optimizers: list[OptimizerInfo] = []
        self._module_paths: dict[int, tuple[ModelInfo, str]] = {}
        self._param_names: dict[int, tuple[ModelInfo, str]] = {}
        self._optimizer_index: dict[int, OptimizerInfo] = {}
        self._groups: dict[int, int] = {}

    # -- models --------------------------------------------------------------------------

    def knows(self, module: torch.nn.Module) -> bool:
        """Whether ``module`` is a known model or inside one."""
        return id(module) in self._module_paths

    def add_candidates(self, modules: Iterable[torch.nn.Module]) -> list[ModelInfo]:
        """Take in called modules; return the models that became new roots."""
        known = {id(m.module) for m in self.models}
        fresh = [m for m in _unique(modules) if id(m) not in self._module_paths]
        if not fresh:
            return []
        everyone = [m.module for m in self.models] + fresh
        inside: set[int] = set()
        for module in everyone:
            inside.update(id(sub) for sub in module.modules() if sub is not module)
        roots = [m for m in everyone if id(m) not in inside]
        kept = [info for info in self.models if id(info.module) not in inside]
        demoted = len(kept) != len(self.models)
        new_roots = [m for m in roots if id(m) not in known]
        self.models = kept
        added = [self._add_model(module) for module in new_roots]
        if demoted:
            self._rebuild_tables()
        return added

    def _add_model(self, module: torch.nn.Module) -> ModelInfo:
        inner = unwrap(module)
        same_class = sum(1 for m in self.models if type(m.inner) is type(inner))
        label = type(inner).__name__ + (f"#{same_class + 1}" if same_class else "")
        info = ModelInfo(module=module, inner=inner, label=label, index=len(self.models))
        self.models.append(info)
        self._index_model(info)
        return info

    def _rebuild_tables(self) -> None:
        self._module_paths.clear()
        self._param_names.clear()
        for info in self.models:
            self._index_model(info)

    def _index_model(self, info: ModelInfo) -> None:
        for path, sub in info.inner.named_modules(remove_duplicate=True):
            self._module_paths.setdefault(id(sub), (info, path))
        for name, param in info.inner.named_parameters(remove_duplicate=True):
            self._param_names.setdefault(id(param), (info, name))
        # The wrapper itself maps to the model's root path.
        self._module_paths.setdefault(id(info.module), (info, ""))

    def _prefix(self, info: ModelInfo, path: str) -> str:
        with_params = [m for m in self.models if _has_parameters(m.inner)]
        if len(with_params) > 1 or info not in with_params:
            return f"{info.label}.{path}" if path else info.label
        return path or info.label

    def module_path(self, module: torch.nn.Module) -> str | None:
        """Display path of a module inside a known model (``encoder.layers.3``)."""
        entry = self._module_paths.get(id(module))
        return None if entry is None else self._prefix(*entry)

    def param_name(self, param: torch.Tensor) -> str | None:
        """Display name of a known model's parameter."""
        entry = self._param_names.get(id(param))
        return None if entry is None else self._prefix(*entry)

    def model_of_param(self, param: torch.Tensor) -> ModelInfo | None:
        """The model holding ``param``."""
        entry = self._param_names.get(id(param))
        return None if entry is None else entry[0]

    # -- optimizers ----------------------------------------------------------------------

    def optimizer(self, optimizer: torch.optim.Optimizer) -> OptimizerInfo | None:
        """The record of a known optimizer whose parameter list is unchanged."""
        info = self._optimizer_index.get(id(optimizer))
        if info is None or info.optimizer is not optimizer:
            return None
        if len(optimizer.param_groups) != self._groups.get(id(optimizer)):
            return None  # add_param_group() was called: re-register
        return info

    def add_optimizer(self, optimizer: torch.optim.Optimizer) -> OptimizerInfo:
        """Register (or re-register) an optimizer; names its parameters."""
        params = tuple(p for group in optimizer.param_groups for p in group["params"])
        names = tuple(self.param_name(p) or f"param[{i}]" for i, p in enumerate(params))
        old = self._optimizer_index.get(id(optimizer))
        if old is not None and old.optimizer is optimizer:
            index = old.index
            self.optimizers = [o for o in self.optimizers if o is not old]
        else:
            index = len(self.optimizers)
        same_class = sum(1 for o in self.optimizers if type(o.optimizer) is type(optimizer))
        label = type(optimizer).__name__ + (f" #{same_class + 1}" if same_class else "")
        info = OptimizerInfo(optimizer, index, params, names, label)
        self.optimizers.append(info)
        self._optimizer_index[id(optimizer)] = info
        self._groups[id(optimizer)] = len(optimizer.param_groups)
        return info

    def models_of(self, optimizer: OptimizerInfo) -> list[ModelInfo]:
        """Known models holding at least one of the optimizer's parameters."""
        found: list[ModelInfo] = []
        for param in optimizer.params:
            model = self.model_of_param(param)
            if model is not None and model not in found:
                found.append(model)
        return found

    def clear(self) -> None:
        """Drop every reference to the user's objects."""
        self.models.clear()
        self.optimizers.clear()
        self._module_paths.clear()
        self._param_names.clear()
        self._optimizer_index.clear()
        self._groups.clear()


def _unique(modules: Iterable[torch.nn.Module]) -> list[torch.nn.Module]:
    seen: dict[int, torch.nn.Module] = {}
    for module in modules:
        seen.setdefault(id(module), module)
    return list(seen.values())


def _has_parameters(module: torch.nn.Module) -> bool:
    return next(iter(module.parameters()), None) is not None
