"""Model zoo of the click-through experiment: every model is built from a config dict."""
import torch.nn as nn


def build_scorer(cfg):
    layers = [nn.Linear(cfg["in_features"], cfg["hidden"]), nn.ReLU()]
    for _ in range(cfg["depth"] - 1):
        layers += [nn.Linear(cfg["hidden"], cfg["hidden"]), nn.ReLU()]
    layers.append(nn.Linear(cfg["hidden"], 1))
    if cfg.get("output") == "probability":
        layers.append(nn.Sigmoid())
    return nn.Sequential(*layers)
