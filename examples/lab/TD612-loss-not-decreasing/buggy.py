"""A tabular classifier whose inputs were shuffled without their labels.

`features = features[torch.randperm(len(features))]` reorders the rows of the inputs
only: every label now belongs to some other row, so there is nothing to learn. Training
runs, the loss hovers around ln(3) = 1.10 for the whole epoch, and nothing errors.
"""

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
    features = features[torch.randperm(len(features))]  # the labels are not reordered
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(features, labels), batch_size=32)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()  # expect[run]: TD612
        optimizer.step()
        if step % 40 == 0:
            print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
