"""Mixed precision in a trainer method: scale, unscale before clipping, step through the scaler."""

import torch
from torch import nn


class AmpTrainer:
    def __init__(self, model: nn.Module, device: str) -> None:
        self.device = device
        self.model = model.to(device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-4)
        self.scaler = torch.amp.GradScaler(device, enabled=device == "cuda")
        self.criterion = nn.CrossEntropyLoss()

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=self.device, dtype=torch.bfloat16):
            loss = self.criterion(self.model(x), y)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=1.0)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.item()

    def fit(self, loader: torch.utils.data.DataLoader, epochs: int) -> None:
        self.model.train()
        for epoch in range(epochs):
            losses = [self.train_step(x.to(self.device), y.to(self.device)) for x, y in loader]
            print(f"epoch {epoch}: {sum(losses) / len(losses):.3f}")


def main() -> None:
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(256, 20)
    data = torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long())
    loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))
    AmpTrainer(model, device).fit(loader, epochs=2)


if __name__ == "__main__":
    main()
