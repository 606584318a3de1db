"""The resident memory a training process pays once, whatever its batch: measured.

A script that imports torch and then trains grows by more than its tensors: building the
first optimizer imports what ``torch.optim`` loads lazily (``torch._dynamo`` and what it
imports, about 70 MiB of interpreter objects on torch 2.13), and the first steps page in
the code of the kernels, the autograd engine and the optimizer. None of it depends on the
batch or the model's size, and none of it shows in this process, which has paid it
already. So it is measured in a fresh interpreter: after ``import torch`` (with this
process's thread count) its peak resident size is reset, a two-layer model is built with
the user's optimizer class (or the ``torch.optim`` class it derives from) and three
training steps run; the growth of the peak resident size, less the model's few bytes, is
the cost. It is measured once per optimizer class and thread count.

Needs Linux (``/proc/self/clear_refs``); elsewhere, or when the fresh process fails,
the cost is unknown and counted as 0.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from typing import Any

__all__ = ["process_cost"]

_TIMEOUT_S = 180
_SCRIPT = r"""
import importlib, json, sys
import torch
threads, optimizer_path = int(sys.argv[1]), sys.argv[2]
torch.set_num_threads(threads)
def status(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")
before = status("VmRSS")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
module, _, name = optimizer_path.rpartition(".")
try:
    optimizer = getattr(importlib.import_module(module), name)(model.parameters(), lr=1e-3)
except Exception:
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(2, 8), torch.randn(2, 2)
for _ in range(3):
    optimizer.zero_grad(set_to_none=True)
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
print(json.dumps(status("VmHWM") - before))
"""


def _torch_optimizer_path(optimizer: Any | None) -> str:
    """The dotted name of the ``torch.optim`` class ``optimizer`` is or derives from
    (a class of the user's is not imported in the fresh process)."""
    for cls in type(optimizer).__mro__ if optimizer is not None else ():
        if cls.__module__.startswith("torch.optim"):
            return f"{cls.__module__}.{cls.__qualname__}"
    return "torch.optim.SGD"


def process_cost(optimizer: Any | None) -> int | None:
    """The resident bytes a fresh process running a training step with ``optimizer``'s
    class grows by beyond its tensors, or ``None`` when it cannot be measured."""
    import torch

    return _measured(_torch_optimizer_path(optimizer), torch.get_num_threads())


@functools.cache
def _measured(optimizer_path: str, threads: int) -> int | None:
    if not os.path.exists("/proc/self/clear_refs"):
        return None
    try:
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(threads), optimizer_path],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=True,
        )
        return max(0, int(json.loads(done.stdout.strip().splitlines()[-1])))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
