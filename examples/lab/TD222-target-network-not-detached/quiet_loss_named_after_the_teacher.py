"""Distillation whose loss module is named after the teacher it compares with.

`self.criterion_teacher` is a `KLDivLoss`: no network, but the student's objective. Its
output must keep its graph, since backward() trains the student through it; the teacher's
own outputs are computed under `torch.no_grad()`.
"""

import torch
from torch import nn


class Distiller:
    def __init__(self) -> None:
        self.student = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 5))
        self.teacher = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 5))
        self.teacher.requires_grad_(False)
        self.criterion_teacher = nn.KLDivLoss(reduction="batchmean")
        self.optimizer = torch.optim.SGD(self.student.parameters(), lr=0.1)

    def step(self, inputs: torch.Tensor) -> float:
        log_student = nn.functional.log_softmax(self.student(inputs), dim=1)
        with torch.no_grad():
            soft = nn.functional.softmax(self.teacher(inputs), dim=1)
        loss = self.criterion_teacher(log_student, soft)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main() -> None:
    torch.manual_seed(0)
    distiller = Distiller()
    for _ in range(10):
        loss = distiller.step(torch.randn(16, 10))
    print(round(loss, 4))


if __name__ == "__main__":
    main()
