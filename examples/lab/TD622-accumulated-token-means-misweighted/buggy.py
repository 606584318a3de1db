"""A small language model trained with gradient accumulation over padded micro-batches.

Sequences are grouped by length, so one micro-batch holds a few short snippets and the
next a few long documents. Each micro-batch loss is a mean over its own unpadded tokens,
then divided by the accumulation count: a token of a short micro-batch weighs many times
one of a long micro-batch, and a step is not the gradient of the large batch it stands
for. The same mistake is made in a plain loop, in a trainer whose step lives in helpers,
and in callbacks that a small engine calls.
"""

import torch
from torch import nn
from torch.nn import functional as F

VOCAB, IGNORED, ACCUMULATION, MICRO = 24, -100, 4, 4


def corpus(n: int = 96) -> list[torch.Tensor]:
    lengths = [
        int(torch.randint(3, 6, ())) if i % 2 else int(torch.randint(24, 40, ())) for i in range(n)
    ]
    return [torch.randint(0, VOCAB, (length,)) for length in lengths]


def micro_batches(texts: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Padded (inputs, labels) micro-batches of texts of similar length, in random order."""
    ordered = sorted(texts, key=len)
    groups = [ordered[i : i + MICRO] for i in range(0, len(ordered), MICRO)]
    batches = []
    for index in torch.randperm(len(groups)).tolist():
        group = groups[index]
        width = max(len(t) for t in group)
        inputs = torch.zeros(len(group), width, dtype=torch.long)
        labels = torch.full((len(group), width), IGNORED)
        for row, text in enumerate(group):
            inputs[row, : len(text)] = text
            labels[row, : len(text) - 1] = text[1:]
        batches.append((inputs, labels))
    return batches


def language_model() -> nn.Module:
    return nn.Sequential(
        nn.Embedding(VOCAB, 16), nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, VOCAB)
    )


def token_loss(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    logits = model(inputs)
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORED)


def train_plain(texts: list[torch.Tensor]) -> float:
    model = language_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss = torch.zeros(())
    for step, (inputs, labels) in enumerate(micro_batches(texts)):
        loss = token_loss(model, inputs, labels)
        (loss / ACCUMULATION).backward()  # expect[run]: TD622
        if (step + 1) % ACCUMULATION == 0:
            optimizer.step()
            optimizer.zero_grad()
    return loss.item()


class Trainer:
    def __init__(self) -> None:
        self.model = language_model()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-3)
        self.micro_steps = 0

    def compute_loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return token_loss(self.model, *batch) / ACCUMULATION

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()  # expect[run]: TD622

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.backward(self.compute_loss(batch))
        self.micro_steps += 1
        if self.micro_steps % ACCUMULATION == 0:
            self.optimizer.step()
            self.optimizer.zero_grad()

    def fit(self, texts: list[torch.Tensor]) -> None:
        for batch in micro_batches(texts):
            self.training_step(batch)


def train_with_callbacks(texts: list[torch.Tensor]) -> None:
    model = language_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = [0]

    def on_batch(inputs: torch.Tensor, labels: torch.Tensor) -> None:
        loss = token_loss(model, inputs, labels).div(ACCUMULATION)
        loss.backward()  # expect[run]: TD622

    def on_batch_end(*_: torch.Tensor) -> None:
        seen[0] += 1
        if seen[0] % ACCUMULATION == 0:
            optimizer.step()
            optimizer.zero_grad()

    for batch in micro_batches(texts):
        for callback in (on_batch, on_batch_end):
            callback(*batch)


def main() -> None:
    torch.manual_seed(0)
    texts = corpus()
    print(f"plain {train_plain(texts):.3f}")
    Trainer().fit(texts)
    train_with_callbacks(texts)


if __name__ == "__main__":
    main()
