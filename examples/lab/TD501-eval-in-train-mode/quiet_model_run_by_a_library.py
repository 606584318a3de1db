"""A network trained by a scikit-learn style wrapper from a library, then used as a
feature extractor (needs skorch to run).

The script builds the network and hands it to `NeuralNetClassifier`, whose `fit()` runs
the training and validation epochs: the library switches the module between train and
eval mode itself (skorch leaves it in eval mode after its last validation pass). The
file cannot see which mode the library leaves, so the feature loop after `fit()` is not
judged: lint stays quiet rather than guess.
"""

import torch
from skorch import NeuralNetClassifier
from torch import nn

FEATURES, CLASSES = 8, 3


class Embedder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 16), nn.ReLU(), nn.Dropout(0.2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class Classifier(nn.Module):
    def __init__(self, embedder: nn.Module) -> None:
        super().__init__()
        self.embedder = embedder
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embedder(x))


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(256, FEATURES)
    y = (x[:, :CLASSES] * 2).argmax(dim=1)
    embedder = Embedder()
    net = NeuralNetClassifier(Classifier(embedder), max_epochs=3, lr=0.1, verbose=0)
    net.fit(x, y)
    features = []
    for batch in x.split(64):
        with torch.no_grad():
            features.append(embedder(batch))
    print(torch.cat(features).shape)


if __name__ == "__main__":
    main()
