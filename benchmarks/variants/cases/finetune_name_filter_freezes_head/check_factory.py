"""Pre-flight factory: both scripts build (model, loader, loss_fn, optimizer) in build()."""
import torch

import buggy as buggy_script
import fixed as fixed_script


def buggy():
    torch.manual_seed(0)
    return buggy_script.build()


def fixed():
    torch.manual_seed(0)
    return fixed_script.build()
