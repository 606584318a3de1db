"""Binary classifier that returns logits and trains with the fused BCEWithLogitsLoss."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 20


class SpamClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.body(inputs).squeeze(1)


def make_dataset(size: int = 512) -> TensorDataset:
    inputs = torch.randn(size, FEATURES)
    targets = (inputs[:, :3].sum(dim=1) > 0).float()
    return TensorDataset(inputs, targets)


def main() -> None:
    torch.manual_seed(0)
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    model = SpamClassifier()
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        correct = 0
        for inputs, targets in loader:
            optimizer.zero_grad()
            logits = model(inputs)
            loss = criterion(logits, targets)
            loss.backward()
            optimizer.step()
            probs = torch.sigmoid(logits.detach())
            correct += int(((probs > 0.5).float() == targets).sum())
        print(f"epoch {epoch}: loss {loss.item():.4f}, accuracy {correct / 512:.3f}")


if __name__ == "__main__":
    main()
