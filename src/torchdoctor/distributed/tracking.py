"""What the cross-rank detectors learn by wrapping a few torch entry points.

* ``torch.distributed.init_process_group``: right after it returns, every rank builds
  torchdoctor's own gloo group (:mod:`torchdoctor.distributed.exchange`);
  ``destroy_process_group``: just before it, the check under way is finished;
* ``DistributedDataParallel.__init__``: which modules are DDP models, and the user's line
  that wrapped them, even when the training forward bypasses the wrapper;
* the DataLoader iterators' ``_next_data``: a fingerprint of the first batch of every
  epoch, and the sampler's epoch when the epoch starts.

Each wrapper calls the original first and then a callback that can never raise into the
user's code; :meth:`Patches.remove` restores every original that is still ours.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = [
    "Patches",
    "after_call",
    "batch_fingerprint",
    "before_call",
    "loader_iterator_classes",
]


class Patches:
    """Attribute patches, each undone by :meth:`remove` if nobody patched over it."""

    def __init__(self, alive: Callable[[], bool] = lambda: True) -> None:
        self._items: list[tuple[Any, str, Any, Any]] = []
        self.active = True
        self.alive = alive  # False once the owner is gone: the next call removes them all

    def live(self) -> bool:
        """Whether callbacks should run; removes every patch once the owner is gone (a
        detector switched off after a failure never reaches its ``on_finish``)."""
        if self.active and not self.alive():
            self.remove()
        return self.active

    def wrap(
        self, owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]
    ) -> bool:
        """Replace ``owner.name`` by ``make(original)``; ``False`` when it does not exist."""
        original = getattr(owner, name, None)
        if original is None:
            return False
        ours = make(original)
        ours.__wrapped__ = original  # type: ignore[attr-defined]
        ours.__doc__ = getattr(original, "__doc__", None)
        setattr(owner, name, ours)
        self._items.append((owner, name, original, ours))
        return True

    def remove(self) -> None:
        """Restore the originals, newest first."""
        self.active = False
        for owner, name, original, ours in reversed(self._items):
            if getattr(owner, name, None) is ours:
                setattr(owner, name, original)
        self._items.clear()


def after_call(
    patches: Patches, callback: Callable[..., None], on_error: Callable[[BaseException], None]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A wrapper maker: call the original, then ``callback(result, *args, **kwargs)``;
    an error of the callback goes to ``on_error``, never to the user's code."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if patches.live():
                try:
                    callback(result, *args, **kwargs)
                except Exception as error:  # noqa: BLE001 - never break the user's call
                    patches.active = False
                    on_error(error)
            return result

        return wrapper

    return make


def before_call(
    patches: Patches, callback: Callable[..., None], on_error: Callable[[BaseException], None]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A wrapper maker: call ``callback(*args, **kwargs)``, then the original."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if patches.live():
                try:
                    callback(*args, **kwargs)
                except Exception as error:  # noqa: BLE001 - never break the user's call
                    patches.active = False
                    on_error(error)
            return original(*args, **kwargs)

        return wrapper

    return make


def loader_iterator_classes() -> list[Any]:
    """The DataLoader iterator classes whose ``_next_data`` returns each batch."""
    module = importlib.import_module("torch.utils.data.dataloader")
    names = ("_SingleProcessDataLoaderIter", "_MultiProcessingDataLoaderIter")
    return [
        cls
        for cls in (getattr(module, n, None) for n in names)
        if cls is not None and "_next_data" in vars(cls)
    ]


def batch_fingerprint(batch: Any, torch: Any) -> float | None:
    """A number two ranks share only when (almost surely) their batches are equal: the
    float64 sums of the batch's first two tensors, weighted. ``None`` without tensors."""
    tensors = _leaves(batch, torch, limit=2)
    if not tensors:
        return None
    total = 0.0
    with torch.no_grad():
        for weight, tensor in enumerate(tensors, start=1):
            if tensor.is_floating_point() or tensor.dtype in (torch.int64, torch.int32):
                total += weight * float(tensor.detach().sum(dtype=torch.float64))
            total += weight * 1e-3 * tensor.numel()
    return total


def _leaves(value: Any, torch: Any, limit: int) -> list[Any]:
    found: list[Any] = []
    stack = [value]
    while stack and len(found) < limit:
        item = stack.pop(0)
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found
