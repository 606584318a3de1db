"""Checkpoints "saved on a GPU", made on a machine without one.

``torch.save`` records, for every storage, the device it lives on (``location_tag``), and
``torch.load`` restores each storage there. :func:`saved_on_cuda` patches that record: while
it is active, every storage is written as living on ``cuda:0``, except storages made by an
explicit ``.cpu()`` call, which stay ``cpu``. That mirrors a program that trains on the GPU
and copies to the host only what it calls ``.cpu()`` on, so the same file fails to load
without ``map_location`` exactly as a real CUDA checkpoint does on a CPU-only machine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock


@contextlib.contextmanager
def saved_on_cuda(device: str = "cuda:0") -> Iterator[None]:
    """Make ``torch.save`` record storages as saved from ``device`` (see module docstring)."""
    import torch
    import torch.serialization

    host: set[int] = set()
    keep: list[object] = []  # keeps the copies alive so their addresses are not reused
    original_cpu = torch.Tensor.cpu

    def cpu(self: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        copy = original_cpu(self, *args, **kwargs).clone()
        keep.append(copy)
        host.add(copy.untyped_storage().data_ptr())
        return copy

    def location_tag(storage: object) -> str:
        return "cpu" if storage.data_ptr() in host else device  # type: ignore[attr-defined]

    with (
        mock.patch.object(torch.Tensor, "cpu", cpu),
        mock.patch.object(torch.serialization, "location_tag", location_tag),
    ):
        yield
