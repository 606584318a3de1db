"""Self-distillation with an EMA teacher: the teacher runs under no_grad and is never stepped."""

import copy

import torch
from torch import nn
from torch.nn import functional as F


@torch.no_grad()
def update_teacher(teacher: nn.Module, student: nn.Module, decay: float) -> None:
    for t, s in zip(teacher.parameters(), student.parameters(), strict=True):
        t.mul_(decay).add_(s.detach(), alpha=1 - decay)


def main() -> None:
    torch.manual_seed(0)
    student = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 8))
    teacher = copy.deepcopy(student)
    for parameter in teacher.parameters():
        parameter.requires_grad_(False)
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-3)
    for _ in range(30):
        x = torch.randn(32, 16)
        noisy = x + 0.1 * torch.randn_like(x)
        with torch.no_grad():
            target = F.softmax(teacher(x) / 0.5, dim=-1)
        loss = F.cross_entropy(student(noisy), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        update_teacher(teacher, student, decay=0.99)
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
