"""Knowledge distillation: a small student learns from a frozen teacher's soft targets.

The distillation term is `KL(log_softmax(student / T) || softmax(teacher / T)) * T^2`:
`F.kl_div` takes log-probabilities as input and probabilities as target, so the softmax
here is correct and required. The teacher runs in eval mode under `torch.no_grad()`.
`make()` is offline distillation: the batch's targets are the teacher's probabilities.
"""

import torch
import torch.nn.functional as F
from torch import nn

T = 4.0
ALPHA = 0.7
CLASSES = 5


def distillation_loss(student_logits, teacher_probabilities):
    log_p = F.log_softmax(student_logits / T, dim=1)
    return F.kl_div(log_p, teacher_probabilities, reduction="batchmean") * T * T


def make_data(generator, n=64):
    x = torch.randn(n, 16, generator=generator)
    y = (x[:, :CLASSES] * 2).argmax(dim=1)
    return x, y


def train_teacher(generator):
    teacher = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, CLASSES))
    optimizer = torch.optim.Adam(teacher.parameters(), lr=1e-2)
    for _ in range(60):
        x, y = make_data(generator)
        optimizer.zero_grad()
        loss = F.cross_entropy(teacher(x), y)
        loss.backward()
        optimizer.step()
    return teacher.eval()


def build_student():
    return nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, CLASSES))


def make():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(26)
    teacher = train_teacher(generator)
    x, _ = make_data(generator)
    with torch.no_grad():
        soft_targets = F.softmax(teacher(x) / T, dim=1)
    student = build_student()
    return student, (x, soft_targets), distillation_loss, torch.optim.Adam(student.parameters(), lr=5e-3)


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(27)
    teacher = train_teacher(generator)
    teacher.requires_grad_(False)
    student = build_student()
    optimizer = torch.optim.Adam(student.parameters(), lr=5e-3)
    student.train()
    for step in range(80):
        x, y = make_data(generator)
        with torch.no_grad():
            teacher_logits = teacher(x)
        student_logits = student(x)
        soft = F.kl_div(F.log_softmax(student_logits / T, dim=1), F.softmax(teacher_logits / T, dim=1),
                        reduction="batchmean") * (T * T)
        hard = F.cross_entropy(student_logits, y)
        loss = ALPHA * soft + (1 - ALPHA) * hard
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step}: soft {soft.item():.4f} hard {hard.item():.4f}")


if __name__ == "__main__":
    main()
