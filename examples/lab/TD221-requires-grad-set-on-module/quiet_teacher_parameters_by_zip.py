"""A masked-image model with a momentum teacher, initialised from the backbone: the loop
walks both networks' parameters side by side, copies each and freezes the teacher's.

`param_teacher` is drawn from `teacher.parameters()`: a parameter, whatever its name
says, so `param_teacher.requires_grad = False` does freeze it.
"""

import torch
from torch import nn


class MomentumPair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
        self.teacher = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
        self.init_teacher()

    def init_teacher(self) -> None:
        for param_backbone, param_teacher in zip(
            self.backbone.parameters(), self.teacher.parameters()
        ):
            param_teacher.data.copy_(param_backbone.data)
            param_teacher.requires_grad = False

    @torch.no_grad()
    def momentum_update(self, momentum: float = 0.99) -> None:
        for p_b, p_t in zip(self.backbone.parameters(), self.teacher.parameters()):
            p_t.mul_(momentum).add_(p_b, alpha=1 - momentum)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(self.backbone(x), self.teacher(x))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = MomentumPair()
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    for _ in range(5):
        optimizer.zero_grad()
        model(torch.randn(16, 8)).backward()
        optimizer.step()
        model.momentum_update()
    print("teacher frozen:", not any(p.requires_grad for p in model.teacher.parameters()))
