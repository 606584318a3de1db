"""A sequence classifier whose LSTM is sequence-first while its data is batch-first.

The inputs are (batch, seq, features) and the head takes `out[:, -1, :]`, the last step of
a batch-first output. The LSTM is built without `batch_first=True`, so it runs its
recurrence along the batch and `out[:, -1, :]` is the last sample of the batch at every
time step: the loss goes down far more slowly than it should, and nothing raises.
"""

import torch
from torch import nn

SEQ, FEATURES, CLASSES = 10, 6, 3


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, 32, 1)
        self.head = nn.Linear(32, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)  # expect[check]: TD109
        return self.head(out[:, -1, :])  # expect[lint]: TD109


def make():
    """What `check` takes: the classifier, a batch-first batch of 16 sequences, the loss."""
    torch.manual_seed(0)
    inputs = torch.randn(16, SEQ, FEATURES)
    targets = (inputs[:, -1, 0] > 0).long() + (inputs[:, 0, 1] > 0).long()
    model = Classifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, (inputs, targets), nn.CrossEntropyLoss(), optimizer


def main() -> None:
    torch.manual_seed(0)
    # A batch as long as the sequence: the shapes fit either way, so nothing raises.
    inputs = torch.randn(SEQ, SEQ, FEATURES)
    targets = (inputs[:, -1, 0] > 0).long() + (inputs[:, 0, 1] > 0).long()
    model = Classifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(30):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
