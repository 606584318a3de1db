"""Pre-flight factory: (model, loader, loss_fn, optimizer) as fit() holds them
before its loop: the module, its train_dataloader(), its criterion and
configure_optimizers()."""
import torch

import buggy as buggy_script
import fixed as fixed_script


def _build(script):
    torch.manual_seed(0)
    module = script.ActivityModule()
    return module, module.train_dataloader(), module.criterion, module.configure_optimizers()


def buggy():
    return _build(buggy_script)


def fixed():
    return _build(fixed_script)
