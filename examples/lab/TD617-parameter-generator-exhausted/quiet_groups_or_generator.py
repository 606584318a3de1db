"""An optimizer factory that takes parameter groups from its config when there are any,
and the model's `parameters()` generator otherwise.

The generator is bound on one side of the `if`; the lines that iterate and measure
`parameters` are on the other side, where it is the config's list of groups. The
generator itself is consumed once, by the optimizer.
"""

import torch
from torch import nn


def get_optimizer(cfg: dict, net: nn.Module) -> torch.optim.Optimizer:
    parameters = cfg.pop("parameters") if "parameters" in cfg else None
    if parameters is None:
        parameters = net.parameters()
    else:
        keys = [group["params"] for group in parameters]
        for i in range(len(parameters)):
            chosen = [p for name, p in net.named_parameters() if name.startswith(keys[i])]
            parameters[i] = {"params": chosen, "lr": parameters[i].get("lr", cfg["lr"])}
    return torch.optim.SGD(parameters, lr=cfg["lr"])


if __name__ == "__main__":
    net = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    plain = get_optimizer({"lr": 0.1}, net)
    grouped = get_optimizer({"lr": 0.1, "parameters": [{"params": "0."}, {"params": "1.", "lr": 0.01}]}, net)
    print(len(plain.param_groups[0]["params"]), [len(g["params"]) for g in grouped.param_groups])
