"""A multi-scale GAN step sums its discriminators' losses for the log line.

Each batch is drawn with ``next()`` at the top of the step, the total is reset to 0 there,
and the inner loop runs over the (three) discriminators: the total holds one step's
losses at most, each already backpropagated, so nothing grows from step to step. A helper
that sums a list of auxiliary losses handed to it keeps no graph the list did not hold.
"""

import torch
from torch import nn


def discriminator_loss(net: nn.Module, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
    bce = nn.functional.binary_cross_entropy_with_logits
    real_out, fake_out = net(real), net(fake.detach())
    return bce(real_out, torch.ones_like(real_out)) + bce(fake_out, torch.zeros_like(fake_out))


def total_of(losses: list[torch.Tensor]) -> torch.Tensor:
    summed = torch.zeros(())
    for aux in losses:
        summed += aux
    return summed


def main(steps: int = 6) -> None:
    torch.manual_seed(0)
    sizes = (16, 8, 4)
    nets = [nn.Sequential(nn.Flatten(), nn.Linear(3 * s * s, 1)) for s in sizes]
    optimizers = [torch.optim.SGD(net.parameters(), lr=0.01) for net in nets]
    batches = iter([[torch.randn(2, 3, s, s) for s in sizes] for _ in range(steps)])
    for step in range(steps):
        images = next(batches)
        fakes = [torch.randn_like(image) for image in images]
        total = 0
        for i in range(len(nets)):
            nets[i].zero_grad()
            loss = discriminator_loss(nets[i], images[i], fakes[i])
            loss.backward()
            optimizers[i].step()
            total += loss
        print(f"step {step}: discriminators {total.item():.4f}")
    print(f"penalties: {float(total_of([torch.tensor(0.5), torch.tensor(0.25)])):.2f}")


if __name__ == "__main__":
    main()
