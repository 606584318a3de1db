"""An adversarial attack that optimises injected input features against a trained model.

The optimizer holds the features only: one copy taken out of numpy and one tensor the
attack makes trainable itself with `requires_grad_(True)`. The model is not trained
here, and `model.eval()` inside the attack step is what it needs (dropout off, so the
attack sees the model the defender deploys).
"""

import numpy as np
import torch
from torch import nn


def attack_step(model: nn.Module, features: torch.Tensor, labels: torch.Tensor, steps: int = 20) -> torch.Tensor:
    injected = features[-8:].cpu().detach().numpy()
    injected = torch.as_tensor(np.arcsin(np.clip(injected, -1.0, 1.0)))
    injected.requires_grad_(True)
    perturbation = torch.zeros_like(features[:-8])
    perturbation.requires_grad_(True)
    optimizer = torch.optim.Adam([injected, perturbation], lr=0.05)
    for _ in range(steps):
        model.eval()
        inputs = torch.cat([features[:-8] + perturbation, torch.sin(injected)])
        loss = -nn.functional.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return torch.sin(injected).detach()


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.5), nn.Linear(16, 2))
    features = torch.rand(32, 4) * 2 - 1
    labels = (features.sum(1) > 0).long()
    for round_ in range(3):
        injected = attack_step(model, features, labels)
        features = torch.cat([features[:-8], injected])
        print(f"round {round_}: injected mean {injected.mean().item():.3f}")


if __name__ == "__main__":
    main()
