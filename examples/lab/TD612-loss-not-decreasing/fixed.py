"""Fixed: one permutation reorders the inputs and the labels together."""

import torch
from torch import nn

FEATURES, CLASSES = 24, 3


def load_table(count: int = 6400) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(count, FEATURES, generator=generator)
    labels = (features[:, :CLASSES] * 2).argmax(dim=1)
    return features, labels


def main() -> None:
    torch.manual_seed(0)
    features, labels = load_table()
    order = torch.randperm(len(features))
    features, labels = features[order], labels[order]
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(features, labels), batch_size=32)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 40 == 0:
            print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
