"""Hook registries, saved and put back by :class:`~torchdoctor.preflight.snapshot.Snapshot`.

The probes trace the user's model with forward hooks and remove them, but a probe that
fails half-way, or the user's own code, could leave one behind; a hook left on the model
would then run in every training step. :class:`HookState` records every hook registry
that running the model can reach: each module's (forward, backward, state-dict...), each
parameter's (``register_hook``, ``register_post_accumulate_grad_hook``), the optimizer's,
and torch's global module and optimizer registries. :meth:`HookState.restore` puts back
their entries and removes the ones added since.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["HookState", "hook_differences"]

_TENSOR_REGISTRIES = ("_backward_hooks", "_post_accumulate_grad_hooks")


def _global_registries() -> list[tuple[str, dict[Any, Any]]]:
    import torch.nn.modules.module as modules
    import torch.optim.optimizer as optimizers

    return [
        (name, value)
        for source in (modules, optimizers)
        for name, value in vars(source).items()
        if name.startswith("_global_") and isinstance(value, dict)
    ]


def _owned_registries(owners: Iterable[Any]) -> list[tuple[str, dict[Any, Any]]]:
    """(label, registry) for the hook dicts of each owner (a module, an optimizer)."""
    return [
        (f"{type(owner).__name__} #{index}.{name}", value)
        for index, owner in enumerate(owners)
        for name, value in vars(owner).items()
        if "hook" in name and isinstance(value, dict)
    ]


class HookState:
    """The hook registries of modules, their parameters, an optimizer and torch itself."""

    def __init__(
        self, modules: list[Any], tensors: list[Any], optimizer: Any | None = None
    ) -> None:
        owners = [*modules, *([optimizer] if optimizer is not None else [])]
        registries = [*_owned_registries(owners), *_global_registries()]
        self._registries = [(label, registry, dict(registry)) for label, registry in registries]
        # A tensor's registry may be None until a hook is added; setting it back through
        # the property also clears what autograd holds for it.
        self._tensors = [
            (tensor, name, getattr(tensor, name, None))
            for tensor in tensors
            for name in _TENSOR_REGISTRIES
        ]
        self._tensor_entries = [
            dict(registry) if registry is not None else None for _, _, registry in self._tensors
        ]

    def restore(self) -> None:
        """Put back every registry's entries; drop hooks registered since."""
        for _, registry, entries in self._registries:
            _refill(registry, entries)
        for (tensor, name, saved), saved_entries in zip(
            self._tensors, self._tensor_entries, strict=True
        ):
            if getattr(tensor, name, None) is not saved:
                setattr(tensor, name, saved)
            if saved is not None and saved_entries is not None:
                _refill(saved, saved_entries)

    def summary(self) -> dict[str, list[Any]]:
        """Every registry's keys as recorded, by a readable label (for tests)."""
        found = {label: list(entries) for label, _, entries in self._registries}
        for index, ((_, name, _), entries) in enumerate(
            zip(self._tensors, self._tensor_entries, strict=True)
        ):
            found[f"tensor {index}.{name}"] = list(entries or {})
        return found


def _refill(registry: dict[Any, Any], entries: dict[Any, Any]) -> None:
    if registry.keys() == entries.keys() and all(registry[k] is v for k, v in entries.items()):
        return
    registry.clear()
    registry.update(entries)


def hook_differences(before: HookState, after: HookState) -> list[str]:
    """Registries whose hooks differ between two records of the same objects (for tests)."""
    first, second = before.summary(), after.summary()
    return [
        f"hooks {label}: {first.get(label)} then {second.get(label)}"
        for label in sorted(first.keys() | second.keys())
        if first.get(label) != second.get(label)
    ]
