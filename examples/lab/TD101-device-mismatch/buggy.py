"""A sequence classifier whose forward builds its position ids on the CPU.

`torch.arange(length)` without `device=` always lands on the CPU. On a CPU-only machine
nothing happens; once the model is moved to a GPU, the position embedding receives CPU
indices and the first forward raises "Expected all tensors to be on the same device".
The shape dry run on the `meta` device fails the same way on any machine: the labels were
not moved to the model's device.
"""

import copy

import torch
from torch import nn

VOCAB, LENGTH, CLASSES = 200, 16, 3


class SequenceClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, 32)
        self.positions = nn.Embedding(LENGTH, 32)
        layer = nn.TransformerEncoderLayer(32, nhead=4, dim_feedforward=64, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1)
        self.head = nn.Linear(32, CLASSES)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1])  # expect[check]: TD101
        hidden = self.tokens(ids) + self.positions(positions)
        return self.head(self.encoder(hidden).mean(dim=1))


def make_batch(size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(0, CLASSES, (size,), generator=generator)
    ids = torch.randint(0, VOCAB, (size, LENGTH), generator=generator)
    ids[:, 0] = labels  # the class is written in the first token
    return ids, labels


def make():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = SequenceClassifier().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return {"model": model, "data": make_batch(), "loss_fn": nn.CrossEntropyLoss(),
            "optimizer": optimizer, "device": device}


def dry_run(model: nn.Module) -> None:
    """One forward and loss on the meta device: shapes checked, no memory or compute spent."""
    meta_model = copy.deepcopy(model).to("meta")
    ids, labels = make_batch(4)
    logits = meta_model(ids.to("meta"))
    loss = nn.functional.cross_entropy(logits, labels)  # expect[run]: TD101
    assert loss.shape == ()


def main() -> None:
    setup = make()
    model, optimizer, device = setup["model"], setup["optimizer"], setup["device"]
    dry_run(model)
    ids, labels = (t.to(device) for t in setup["data"])
    steps = 20
    for _ in range(steps):
        optimizer.zero_grad()
        loss = setup["loss_fn"](model(ids), labels)
        loss.backward()
        optimizer.step()
    print(f"after {steps} steps on {device}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
