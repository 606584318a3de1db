"""A small language model trained with gradient accumulation over padded micro-batches.

Sequences are grouped by length, so micro-batches hold very different numbers of tokens.
Each micro-batch loss is a sum over its unpadded tokens, divided by the number of
unpadded tokens of the whole accumulation window, counted before its first micro-batch:
every token weighs the same, as in the large batch the step stands for. Done in a plain
loop, in a trainer whose step lives in helpers, and in callbacks that a small engine
calls.
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
    """The summed loss of the micro-batch's unpadded tokens."""
    logits = model(inputs)
    return F.cross_entropy(
        logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORED, reduction="sum"
    )


def counted(window: list[tuple[torch.Tensor, torch.Tensor]]) -> int:
    """Unpadded target tokens in a whole accumulation window."""
    return sum(int((labels != IGNORED).sum()) for _, labels in window)


def train_plain(texts: list[torch.Tensor]) -> float:
    model = language_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss = torch.zeros(())
    batches = micro_batches(texts)
    tokens = 1
    for step, (inputs, labels) in enumerate(batches):
        if step % ACCUMULATION == 0:
            tokens = counted(batches[step : step + ACCUMULATION])
        loss = token_loss(model, inputs, labels)
        (loss / tokens).backward()
        if (step + 1) % ACCUMULATION == 0:
            optimizer.step()
            optimizer.zero_grad()
    return loss.item() / tokens


class Trainer:
    def __init__(self) -> None:
        self.model = language_model()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-3)
        self.micro_steps = 0
        self.tokens = 1

    def compute_loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return token_loss(self.model, *batch) / self.tokens

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.backward(self.compute_loss(batch))
        self.micro_steps += 1
        if self.micro_steps % ACCUMULATION == 0:
            self.optimizer.step()
            self.optimizer.zero_grad()

    def fit(self, texts: list[torch.Tensor]) -> None:
        batches = micro_batches(texts)
        for start in range(0, len(batches), ACCUMULATION):
            window = batches[start : start + ACCUMULATION]
            self.tokens = counted(window)
            for batch in window:
                self.training_step(batch)


def train_with_callbacks(texts: list[torch.Tensor]) -> None:
    model = language_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = [0]
    batches = micro_batches(texts)
    tokens = [1]

    def on_batch_start(*_: torch.Tensor) -> None:
        if seen[0] % ACCUMULATION == 0:
            tokens[0] = counted(batches[seen[0] : seen[0] + ACCUMULATION])

    def on_batch(inputs: torch.Tensor, labels: torch.Tensor) -> None:
        loss = token_loss(model, inputs, labels).div(tokens[0])
        loss.backward()

    def on_batch_end(*_: torch.Tensor) -> None:
        seen[0] += 1
        if seen[0] % ACCUMULATION == 0:
            optimizer.step()
            optimizer.zero_grad()

    for batch in batches:
        for callback in (on_batch_start, on_batch, on_batch_end):
            callback(*batch)


def main() -> None:
    torch.manual_seed(0)
    texts = corpus()
    print(f"plain {train_plain(texts):.3f}")
    Trainer().fit(texts)
    train_with_callbacks(texts)


if __name__ == "__main__":
    main()
