"""Keep the best weights seen during training, then restore them at the end.

`best_state = model.state_dict()` keeps references to the model's own tensors, not a
copy: every later optimizer step updates them in place, so `load_state_dict(best_state)`
after the loop loads the final weights into themselves and the "best" model is the last.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def accuracy(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        correct = (model(inputs).argmax(dim=1) == labels).float().mean().item()
    model.train()
    return correct


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(512, 10)
    labels = (inputs[:, 0] + 0.5 * inputs[:, 1] > 0).long()
    loader = DataLoader(TensorDataset(inputs[:384], labels[:384]), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    best_acc, best_state = 0.0, None
    for epoch in range(6):
        for group in optimizer.param_groups:  # the last epochs overshoot: the best comes early
            group["lr"] = 0.5 if epoch < 3 else 8.0
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        acc = accuracy(model, inputs[384:], labels[384:])
        if acc > best_acc:
            best_acc = acc
            best_state = model.state_dict()  # expect[lint]: TD912
    model.load_state_dict(best_state)  # expect[run]: TD912
    print(f"best validation accuracy {best_acc:.3f}, restored model scores "
          f"{accuracy(model, inputs[384:], labels[384:]):.3f}")


if __name__ == "__main__":
    main()
