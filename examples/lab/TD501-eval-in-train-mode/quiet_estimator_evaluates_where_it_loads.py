"""A scikit-learn style estimator around a pretrained network that it only ever predicts with.

`fit()` calls `_load_model()`, which builds the network, loads its weights and puts it in
eval mode on the next line; no method of the estimator trains it. `predict()` batches the
inputs under `no_grad` without calling `eval()` itself: the network is in eval mode
wherever it was built, so its dropout is off.
"""

import torch
from torch import nn


class Network(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class Classifier:
    def __init__(self, state: dict[str, torch.Tensor], batch_size: int = 16) -> None:
        self.state = state
        self.batch_size = batch_size

    def _load_model(self) -> None:
        self.model_ = Network()
        self.model_.load_state_dict(self.state)
        self.model_.eval()

    def fit(self) -> "Classifier":
        self._load_model()
        return self

    def predict(self, inputs: torch.Tensor) -> torch.Tensor:
        outputs = []
        for batch in inputs.split(self.batch_size):
            with torch.no_grad():
                outputs.append(self.model_(batch).argmax(-1))
        return torch.cat(outputs)


def main() -> None:
    torch.manual_seed(0)
    state = Network().state_dict()
    classifier = Classifier(state).fit()
    inputs = torch.randn(40, 6)
    first, second = classifier.predict(inputs), classifier.predict(inputs)
    assert torch.equal(first, second)  # no dropout: the same predictions twice
    print(first.bincount(minlength=3).tolist())


if __name__ == "__main__":
    main()
