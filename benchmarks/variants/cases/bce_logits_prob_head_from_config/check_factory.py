"""Pre-flight factory: (model, loader, loss_fn, optimizer) exactly as main() of
buggy.py / fixed.py holds them before its loop (both scripts expose build())."""
import torch

import buggy as buggy_script
import fixed as fixed_script


def buggy():
    torch.manual_seed(0)
    return buggy_script.build(buggy_script.CONFIG)


def fixed():
    torch.manual_seed(0)
    return fixed_script.build(fixed_script.CONFIG)
