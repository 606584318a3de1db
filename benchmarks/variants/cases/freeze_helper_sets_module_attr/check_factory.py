"""Pre-flight factory: (model, loader, loss_fn, optimizer) as the adaptation stage
holds them: the pretrained model after adaptation_setup(), the target-task
loader, F.cross_entropy and the optimizer run_stage() builds."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import buggy as buggy_script
import fixed as fixed_script


def _build(script):
    torch.manual_seed(0)
    xs, ys = script.make_task(3000, seed=1, shift=0.0)
    xt, yt = script.make_task(600, seed=2, shift=1.5)
    model = script.Net()
    script.run_stage(model, DataLoader(TensorDataset(xs, ys), batch_size=64, shuffle=True), epochs=3, lr=1e-2)
    script.adaptation_setup(model)
    loader = DataLoader(TensorDataset(xt, yt), batch_size=32, shuffle=True)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    return model, loader, F.cross_entropy, optimizer


def buggy():
    return _build(buggy_script)


def fixed():
    return _build(fixed_script)
