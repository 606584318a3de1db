"""A gate trainer that saves its gate to the CPU each epoch and moves it back with
`self.gate = self.gate.to(device)`, after the optimizer was built.

A module's `.to()` moves its parameters in place and returns the same object: the
rebinding hands back the module the optimizer already holds, so nothing is replaced.
"""

import io

import torch
from torch import nn


class GateTrainer:
    def __init__(self) -> None:
        self.gate = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        self.saved = io.BytesIO()

    def save(self) -> None:
        self.saved = io.BytesIO()
        torch.save(self.gate.cpu().state_dict(), self.saved)

    def train(self, epochs: int = 3, device: str = "cpu") -> float:
        optimizer = torch.optim.AdamW(self.gate.parameters(), lr=1e-2)
        loss = torch.zeros(())
        for _ in range(epochs):
            for _ in range(8):
                x, y = torch.randn(32, 8, device=device), torch.randint(0, 4, (32,))
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(self.gate(x), y.to(device))
                loss.backward()
                optimizer.step()
            self.save()
            self.gate = self.gate.to(device)
        return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    print(f"loss {GateTrainer().train():.3f}")
