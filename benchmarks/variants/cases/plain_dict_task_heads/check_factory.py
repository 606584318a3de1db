"""Pre-flight factory: (model, loader, loss_fn, optimizer) from the scripts' build().
build() makes one DataLoader per task; the first task's loader stands for them
(they are built the same way)."""
import torch

import buggy as buggy_script
import fixed as fixed_script


def _build(script):
    torch.manual_seed(0)
    model, loaders, loss_fn, optimizer = script.build()
    return model, loaders[next(iter(script.TASKS))], loss_fn, optimizer


def buggy():
    return _build(buggy_script)


def fixed():
    return _build(fixed_script)
