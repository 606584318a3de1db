"""Tabular fraud-score classifier with BatchNorm and Dropout. Validation runs
every `eval_every` steps inside the epoch so long epochs get several
checkpoints of the validation curve."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_table(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 24, generator=g) * torch.linspace(0.2, 30.0, 24) + torch.linspace(-40, 40, 24)
    z = (x - torch.linspace(-40, 40, 24)) / torch.linspace(0.2, 30.0, 24)
    score = z[:, 0] * z[:, 1] + z[:, 5] - z[:, 23] + 0.5 * z[:, 12] ** 2
    y = (score > score.median()).long()
    return x, y


def build_model():
    return nn.Sequential(
        nn.Linear(24, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.3),
        nn.Linear(128, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.3),
        nn.Linear(128, 2))


@torch.no_grad()
def validate(model, xv, yv):
    model.eval()
    out = model(xv)
    return F.cross_entropy(out, yv).item(), (out.argmax(1) == yv).float().mean().item()


def main():
    torch.manual_seed(0)
    x, y = make_table(6000, seed=1)
    xv, yv = make_table(1500, seed=2)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    eval_every, step, train_mode_steps = 30, 0, 0
    for epoch in range(3):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            step += 1
            train_mode_steps += model.training
            if step % eval_every == 0:
                val_loss, val_acc = validate(model, xv, yv)
                model.train()
        print(f"epoch {epoch} val_loss={val_loss:.4f} val_acc={val_acc:.3f} "
              f"steps_in_train_mode={train_mode_steps}/{step}")


if __name__ == "__main__":
    main()
