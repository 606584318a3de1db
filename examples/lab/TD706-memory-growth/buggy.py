"""A 1000-class classifier that keeps every batch's logits for an end-of-run report.

`all_logits.append(logits.detach())` stores a 256 x 1000 float tensor (1 MB) per step and
never lets go: memory grows by 1 MB every step, which a long run turns into an
out-of-memory crash hours in. Only the predicted class was ever needed.
"""

import torch
from torch import nn

FEATURES, CLASSES = 64, 1000


def main() -> None:
    torch.manual_seed(0)
    weights = torch.randn(FEATURES, CLASSES)
    model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    all_logits, all_labels = [], []
    for _ in range(160):
        x = torch.randn(256, FEATURES)
        y = (x @ weights).argmax(dim=1)
        optimizer.zero_grad()
        logits = model(x)
        nn.functional.cross_entropy(logits, y).backward()
        optimizer.step()
        all_logits.append(logits.detach())
        all_labels.append(y)
    accuracy = (torch.cat(all_logits).argmax(dim=1) == torch.cat(all_labels)).float().mean()
    print(f"training accuracy over the run: {accuracy:.3f}")


if __name__ == "__main__":
    main()
