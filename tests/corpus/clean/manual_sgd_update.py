"""Linear regression trained by hand: no optimizer object, a manual SGD update.

The update runs under `torch.no_grad()` with in-place ops on the parameters, and the
gradients are reset by assigning `p.grad = None` for every parameter. Targets have shape
[N, 1], like the model's output.
"""

import torch
from torch import nn

LEARNING_RATE = 0.1


def make_data(n=200):
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(n, 3, generator=generator)
    true_w = torch.tensor([[1.5], [-2.0], [0.5]])
    y = x @ true_w + 0.3 + 0.05 * torch.randn(n, 1, generator=generator)
    return x, y


def main():
    torch.manual_seed(0)
    x, y = make_data()
    model = nn.Linear(3, 1)
    params = list(model.parameters())
    for epoch in range(50):
        prediction = model(x)
        loss = nn.functional.mse_loss(prediction, y)
        loss.backward()
        with torch.no_grad():
            for p in params:
                p.sub_(LEARNING_RATE * p.grad)
        for p in params:
            p.grad = None
        if epoch % 10 == 9:
            print(f"epoch {epoch}: mse {loss.item():.5f}")
    print("weights", model.weight.detach().squeeze().tolist(), "bias", model.bias.item())


if __name__ == "__main__":
    main()
