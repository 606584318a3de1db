"""A sigmoid head chosen by the experiment config, with a with-logits loss from the same config.

`build_scorer` appends `nn.Sigmoid()` when the config asks for probabilities, and the loss
picked by name from the same config is `binary_cross_entropy_with_logits`, which applies
sigmoid itself: every input is squashed into (0.5, 0.73), the loss cannot go below 0.31
and the gradients shrink, so the printed loss stalls high.
"""

import torch
import torch.nn.functional as F
from torch import nn

CONFIG = {
    "model": {"in_features": 16, "hidden": 32, "output": "probability"},
    "loss": "bce_logits",
    "epochs": 20,
}
LOSSES = {"bce_logits": F.binary_cross_entropy_with_logits, "mse": F.mse_loss}


def build_scorer(cfg: dict) -> nn.Sequential:
    layers = [nn.Linear(cfg["in_features"], cfg["hidden"]), nn.ReLU()]
    layers.append(nn.Linear(cfg["hidden"], 1))
    if cfg.get("output") == "probability":
        layers.append(nn.Sigmoid())
    return nn.Sequential(*layers)


def build(cfg: dict) -> tuple:
    model = build_scorer(cfg["model"])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    return model, LOSSES[cfg["loss"]], optimizer


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(512, 16)
    y = (x[:, :3].sum(1, keepdim=True) > 0).float()
    model, loss_fn, optimizer = build(CONFIG)
    for epoch in range(CONFIG["epochs"]):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)  # expect[lint]: TD303
        loss.backward()
        optimizer.step()
        if epoch % 5 == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
