"""Multi-task model: one shared trunk, one small head per task, looked up by
task name. Each batch carries samples of a single task."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

TASKS = {"sentiment": 2, "topic": 5, "urgency": 3}


class MultiTaskNet(nn.Module):
    def __init__(self, tasks, hidden=48):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(30, hidden), nn.ReLU())
        self.heads = nn.ModuleDict({name: nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n))
                                    for name, n in tasks.items()})

    def forward(self, x, task):
        return self.heads[task](self.trunk(x))


def make_task(task, n, seed):
    g = torch.Generator().manual_seed(seed)
    n_cls = TASKS[task]
    w = torch.randn(30, n_cls, generator=torch.Generator().manual_seed(len(task)))
    x = torch.randn(n, 30, generator=g)
    return x, (x @ w + 0.3 * torch.randn(n, n_cls, generator=g)).argmax(1)


def build():
    model = MultiTaskNet(TASKS)
    loaders = {t: DataLoader(TensorDataset(*make_task(t, 1500, seed=1)), batch_size=32, shuffle=True)
               for t in TASKS}
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return model, loaders, F.cross_entropy, optimizer


def main():
    torch.manual_seed(0)
    model, loaders, loss_fn, optimizer = build()
    n_params = sum(p.numel() for p in model.parameters())
    for epoch in range(3):
        model.train()
        for batches in zip(*(loaders[t] for t in TASKS)):
            for task, (xb, yb) in zip(TASKS, batches):
                optimizer.zero_grad()
                loss_fn(model(xb, task), yb).backward()
                optimizer.step()
        model.eval()
        accs = []
        with torch.no_grad():
            for task in TASKS:
                xv, yv = make_task(task, 500, seed=2)
                accs.append(f"{task}={(model(xv, task).argmax(1) == yv).float().mean().item():.3f}")
        print(f"epoch {epoch} {' '.join(accs)} optimised_params={n_params}")


if __name__ == "__main__":
    main()
