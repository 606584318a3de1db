"""A step-counted trainer that validates once more and stops when the step budget is
spent, and puts the model back in training mode at the top of every pass.

`validate_and_save()` calls `model.eval()`, but at the last step it is followed by
`break`: no training forward runs after it. The periodic validation further down is
undone by the `model.train()` that starts the next pass.
"""

import torch
from torch import nn


class Trainer:
    def __init__(self, total_steps: int = 20, every: int = 5) -> None:
        self.model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.2), nn.Linear(16, 1))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.total_steps, self.every, self.step = total_steps, every, 0

    def validate_and_save(self) -> float:
        self.model.eval()
        with torch.no_grad():
            x = torch.randn(32, 8)
            return nn.functional.mse_loss(self.model(x), x.sum(1, keepdim=True)).item()

    def train(self, batches: list[torch.Tensor]) -> None:
        done = False
        while not done:
            for x in batches:
                self.model.train()
                if self.step >= self.total_steps:
                    print("final validation", self.validate_and_save())
                    done = True
                    break
                self.optimizer.zero_grad()
                nn.functional.mse_loss(self.model(x), x.sum(1, keepdim=True)).backward()
                self.optimizer.step()
                self.step += 1
                if self.step % self.every == 0:
                    print("validation", self.validate_and_save())


if __name__ == "__main__":
    torch.manual_seed(0)
    Trainer().train([torch.randn(16, 8) for _ in range(4)])
