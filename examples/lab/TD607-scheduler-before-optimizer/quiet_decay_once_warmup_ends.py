"""A learning-rate decay that starts only once a warm-up of the task has ended.

Certified training raises the perturbation radius epoch by epoch; the learning rate is
decayed, at the top of each epoch, only after the radius has reached its target. By then
many epochs of optimizer steps have run, so the scheduler never steps before the first
update.
"""

import torch
from torch import nn


class RadiusSchedule:
    def __init__(self, target: float, epochs: int) -> None:
        self.target, self.epochs, self.epoch = target, epochs, 0

    def radius(self) -> float:
        return self.target * min(1.0, self.epoch / self.epochs)

    def reached_max(self) -> bool:
        return self.epoch >= self.epochs

    def next_epoch(self) -> None:
        self.epoch += 1


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    radius = RadiusSchedule(target=0.1, epochs=2)
    batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(4)]
    for epoch in range(4):
        if radius.reached_max():
            scheduler.step()
        for x, y in batches:
            noisy = x + radius.radius() * torch.randn_like(x)
            loss = nn.functional.cross_entropy(model(noisy), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        radius.next_epoch()
        print(f"epoch {epoch}: lr {optimizer.param_groups[0]['lr']:.4f}")


if __name__ == "__main__":
    main()
