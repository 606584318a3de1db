"""Fixed: `loss.backward()` runs at every step, outside the logging branch."""

import torch
from torch import nn

FEATURES, CLASSES = 32, 4
LOG_EVERY = 10


def make_data(count: int = 3200) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(count, FEATURES, generator=generator)
    return x, (x[:, :CLASSES] * 3).argmax(dim=1)


def main() -> None:
    torch.manual_seed(0)
    x, y = make_data()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                         batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step, (inputs, targets) in enumerate(loader):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        if step % LOG_EVERY == 0:
            print(f"step {step}: loss {loss.item():.4f}")
        optimizer.step()


if __name__ == "__main__":
    main()
