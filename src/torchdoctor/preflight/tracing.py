"""What happens inside one forward pass: which modules run, in what order, on what.

:class:`ForwardTrace` hooks every module of the model for the duration of one forward and
records the module call stack (so a failure or an activation can be pinned to a module
path), the order in which parameter-owning modules first run, the input of the first of
them, which module produced each output tensor, and, on request, per-unit statistics of
every ReLU (``nn.ReLU``, ``F.relu``, ``torch.relu``, ``Tensor.relu``).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

__all__ = ["ForwardTrace", "ReluSite", "display_name"]

_RELU_NAMES = frozenset({"relu", "relu_"})


def display_name(path: str, model: Any) -> str:
    """A module path for messages; the root module is shown by its class name."""
    return path or type(model).__name__


@dataclass(slots=True)
class ReluSite:
    """Where a ReLU ran (the innermost module) and which of its units ever fired.

    Units are along dimension 1 (features of ``[N, F]``, channels of ``[N, C, H, W]``).
    """

    module: str
    alive: Any  # bool tensor [units]: True where the unit was positive at least once
    observations: int  # values seen per unit in one call (batch x positions)
    calls: int = 1

    @property
    def units(self) -> int:
        """Number of units."""
        return int(self.alive.numel())


class ForwardTrace:
    """Context manager recording one forward pass of ``model`` (see the module doc)."""

    def __init__(self, model: Any, *, activations: bool = False) -> None:
        self.model = model
        self.names = {module: name for name, module in model.named_modules()}
        self.stack: list[str] = []
        self.called: set[str] = set()
        self.order: list[str] = []  # parameter-owning modules, in first-call order
        self.first_input: tuple[str, Any] | None = None  # (module path, its input)
        self.relu_sites: dict[str, ReluSite] = {}
        self._outputs: dict[int, tuple[weakref.ref[Any], str]] = {}
        self._handles: list[Any] = []
        self._mode = _relu_mode(self) if activations else None

    def __enter__(self) -> ForwardTrace:
        for module in self.names:
            self._handles.append(module.register_forward_pre_hook(self._before))
            self._handles.append(module.register_forward_hook(self._after))
        if self._mode is not None:
            self._mode.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._mode is not None:
            self._mode.__exit__(*exc_info)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    @property
    def current_module(self) -> str | None:
        """The innermost module running now (after a failure: where it failed)."""
        return self.stack[-1] if self.stack else None

    def producer_of(self, tensor: Any) -> str | None:
        """The innermost module whose output is exactly ``tensor``, if any."""
        entry = self._outputs.get(id(tensor))
        if entry is None or entry[0]() is not tensor:
            return None
        return entry[1]

    def _before(self, module: Any, args: Any) -> None:
        name = self.names.get(module, "?")
        self.stack.append(name)
        if name in self.called:
            return
        self.called.add(name)
        params = list(module.parameters(recurse=False))
        if not params:
            return
        self.order.append(name)
        # The first leaf layer with a weight matrix is the one that reads the raw inputs;
        # a container owning a token or a scale parameter is not.
        leaf = next(module.children(), None) is None
        if self.first_input is None and args and leaf and any(p.dim() >= 2 for p in params):
            first = args[0]
            self.first_input = (name, first.detach() if hasattr(first, "detach") else first)

    def _after(self, module: Any, args: Any, output: Any) -> None:
        if self.stack:
            self.stack.pop()
        import torch

        if not isinstance(output, torch.Tensor):
            return
        # The innermost module's record stays (an outer one returns the same tensor); a
        # record whose tensor has died is replaced: a freed intermediate's id is reused.
        known = self._outputs.get(id(output))
        if known is None or known[0]() is None:
            self._outputs[id(output)] = (weakref.ref(output), self.names.get(module, "?"))

    def record_relu(self, output: Any) -> None:
        """Fold one ReLU output into the statistics of its site."""
        import torch

        if not isinstance(output, torch.Tensor) or output.dim() < 2 or output.shape[1] == 0:
            return
        units = output.shape[1]
        alive = output.detach().gt(0).transpose(0, 1).reshape(units, -1).any(dim=1)
        site_name = self.current_module or ""
        site = self.relu_sites.get(site_name)
        if site is None or site.units != units:
            self.relu_sites[site_name] = ReluSite(site_name, alive, output.numel() // units)
        else:
            site.alive = site.alive | alive
            site.calls += 1


def _relu_mode(trace: ForwardTrace) -> Any:
    from torch.overrides import TorchFunctionMode

    class _ReluRecorder(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            result = func(*args, **(kwargs or {}))
            if getattr(func, "__name__", "") in _RELU_NAMES:
                trace.record_relu(result)
            return result

    return _ReluRecorder()
