"""A 10-class classifier with a ReLU after its output layer, trained with a high rate.

ReLU on the logits clips every negative score to 0 and passes no gradient through it.
A few large early steps push all ten logits below zero for every input: the output is
all zeros, the cross-entropy is exactly ln(10) = 2.302585 at every step, and no
gradient can ever bring a logit back.
"""

import torch
from torch import nn

FEATURES, CLASSES = 20, 10


def make_batch(weights: torch.Tensor, size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(size, FEATURES)
    return x, (x @ weights).argmax(dim=1)


def main() -> None:
    torch.manual_seed(0)
    weights = torch.randn(FEATURES, CLASSES)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(),
                          nn.Linear(64, CLASSES), nn.ReLU())
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0, momentum=0.9)
    for step in range(120):
        x, y = make_batch(weights)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()  # expect[run]: TD614
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step}: loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
