"""The trainer-class shape fixed: the helper unscales the gradients before clipping."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model: nn.Module, device: torch.device) -> None:
        self.model = model.to(device)
        self.device = device
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.scaler = torch.amp.GradScaler(device.type)

    def _clip_gradients(self) -> None:
        self.scaler.unscale_(self.optimizer)
        nn.utils.clip_grad_value_(self.model.parameters(), 0.5)

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            loss = nn.functional.mse_loss(self.model(inputs), targets)
        self.scaler.scale(loss).backward()
        self._clip_gradients()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    inputs = torch.randn(256, 16)
    data = TensorDataset(inputs, inputs @ torch.randn(16, 1))
    trainer = Trainer(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)), torch.device("cpu"))
    for epoch in range(3):
        for batch_inputs, batch_targets in DataLoader(data, batch_size=64, shuffle=True):
            last = trainer.step(batch_inputs, batch_targets)
        print(f"epoch {epoch}: loss {last:.4f}")
