"""A defect detector trained with a soft-F1 loss computed in numpy.

The loss is the metric the team reports, so it is computed the same way: the
probabilities go to numpy, the F1 score is computed there, and `1 - F1` comes back as a
new tensor with `requires_grad=True`. That tensor is a leaf: `backward()` runs without
error, but no gradient reaches the model, and the loss never moves.
"""

import torch
from torch import nn

FEATURES = 10


def soft_f1_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    probabilities = torch.sigmoid(logits.squeeze(1)).detach().numpy()
    truth = targets.numpy()
    true_positive = (probabilities * truth).sum()
    f1 = 2 * true_positive / (probabilities.sum() + truth.sum() + 1e-8)
    return torch.tensor(1.0 - f1, dtype=torch.float32, requires_grad=True)


def make_batch(size: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(size, FEATURES, generator=generator)
    defective = (inputs[:, 0] + inputs[:, 1] > 1.0).float()
    return inputs, defective


def make():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, make_batch(), soft_f1_loss, optimizer


def main() -> None:
    model, (inputs, defective), loss_fn, optimizer = make()
    for step in range(30):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), defective)
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
