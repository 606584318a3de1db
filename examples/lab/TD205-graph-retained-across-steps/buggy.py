"""A classifier that logs its average epoch loss by adding up the loss *tensors*.

`running_loss += loss` keeps every step's loss, and with it the autograd graph behind
it, alive until the end of the epoch: memory grows with every step, and the epoch's sum
is itself a tensor with a graph thousands of nodes deep.
"""

import torch
from torch import nn

FEATURES, CLASSES = 32, 4


def make_data(count: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(count, FEATURES, generator=generator)
    return x, (x[:, :CLASSES] * 3).argmax(dim=1)


def main() -> None:
    torch.manual_seed(0)
    x, y = make_data()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                         batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        running_loss = 0.0
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            running_loss += loss  # expect: TD205
        print(f"epoch {epoch}: mean loss {running_loss / len(loader):.4f}")


if __name__ == "__main__":
    main()
