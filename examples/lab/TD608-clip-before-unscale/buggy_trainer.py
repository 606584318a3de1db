"""A mixed-precision trainer class whose clipping lives in a helper method.

``step()`` backpropagates the scaled loss and then calls ``_clip_gradients()``, which
clips by value while the gradients are still multiplied by the loss scale: the clip
applies to scaled values, so it cuts them thousands of times more than intended.
"""

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
        nn.utils.clip_grad_value_(self.model.parameters(), 0.5)  # expect[lint,run]: TD608

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
