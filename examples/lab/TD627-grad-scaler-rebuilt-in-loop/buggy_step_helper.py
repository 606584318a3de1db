"""A trainer whose step method builds its own GradScaler, under gradient accumulation.

`train_step()` runs once per batch and makes a new scaler each time, so the scale that
`update()` backs off after an overflow is gone by the next call.
"""

import torch
from torch import nn


class Trainer:
    def __init__(self, model: nn.Module, accumulate: int = 2) -> None:
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        self.accumulate = accumulate
        self.device = "cuda" if torch.cuda.is_available() else "cpu"

    def train_step(self, step: int, inputs: torch.Tensor, targets: torch.Tensor) -> float:
        scaler = torch.amp.GradScaler(self.device, enabled=self.device == "cuda")  # expect: TD627
        with torch.autocast(self.device, enabled=self.device == "cuda"):
            loss = nn.functional.mse_loss(self.model(inputs), targets) / self.accumulate
        scaler.scale(loss).backward()
        if (step + 1) % self.accumulate == 0:
            scaler.step(self.optimizer)
            scaler.update()
            self.optimizer.zero_grad()
        return loss.item()

    def fit(self, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        for step, (inputs, targets) in enumerate(batches):
            self.train_step(step, inputs, targets)


if __name__ == "__main__":
    torch.manual_seed(0)
    data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(8)]
    Trainer(nn.Linear(4, 1)).fit(data)
