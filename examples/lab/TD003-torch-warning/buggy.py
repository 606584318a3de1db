"""Knowledge distillation with a KL-divergence loss left at reduction="mean".

PyTorch warns that "mean" divides by the number of classes as well as the batch size: the
distillation term is 100x (here) too small, so the student mostly ignores the teacher.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES, TEMPERATURE = 100, 2.0


def main() -> None:
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, CLASSES)).eval()
    student = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, CLASSES))
    distill = nn.KLDivLoss(reduction="mean")
    optimizer = torch.optim.Adam(student.parameters(), lr=1e-3)
    data = TensorDataset(torch.randn(512, 32), torch.randint(0, CLASSES, (512,)))
    for epoch in range(2):
        for x, y in DataLoader(data, batch_size=64, shuffle=True):
            with torch.no_grad():
                soft_targets = (teacher(x) / TEMPERATURE).softmax(dim=1)
            logits = student(x)
            log_probs = (logits / TEMPERATURE).log_softmax(dim=1)
            soft = distill(log_probs, soft_targets)  # expect[run]: TD003
            loss = nn.functional.cross_entropy(logits, y) + TEMPERATURE**2 * soft
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
