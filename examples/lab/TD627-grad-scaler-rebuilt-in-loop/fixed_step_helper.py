"""The trainer builds its GradScaler once, in `__init__`, and every step uses that one."""

import torch
from torch import nn


class Trainer:
    def __init__(self, model: nn.Module, accumulate: int = 2) -> None:
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        self.accumulate = accumulate
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.scaler = torch.amp.GradScaler(self.device, enabled=self.device == "cuda")

    def train_step(self, step: int, inputs: torch.Tensor, targets: torch.Tensor) -> float:
        with torch.autocast(self.device, enabled=self.device == "cuda"):
            loss = nn.functional.mse_loss(self.model(inputs), targets) / self.accumulate
        self.scaler.scale(loss).backward()
        if (step + 1) % self.accumulate == 0:
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad()
        return loss.item()

    def fit(self, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        for step, (inputs, targets) in enumerate(batches):
            self.train_step(step, inputs, targets)


if __name__ == "__main__":
    torch.manual_seed(0)
    data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(8)]
    Trainer(nn.Linear(4, 1)).fit(data)
