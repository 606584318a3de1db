"""Network factory shared by the experiment scripts."""
import torch.nn as nn


def make_regressor(in_features, width=64):
    return nn.Sequential(
        nn.Linear(in_features, width), nn.BatchNorm1d(width), nn.ReLU(),
        nn.Linear(width, width), nn.BatchNorm1d(width), nn.ReLU(),
        nn.Linear(width, 1))
