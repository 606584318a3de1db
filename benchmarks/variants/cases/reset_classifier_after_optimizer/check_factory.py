"""Pre-flight factory: both scripts build (model, loader, loss_fn, optimizer) in setup()."""
import torch

import buggy as buggy_script
import fixed as fixed_script


def buggy():
    torch.manual_seed(0)
    return buggy_script.setup(n_classes=12)


def fixed():
    torch.manual_seed(0)
    return fixed_script.setup(n_classes=12)
