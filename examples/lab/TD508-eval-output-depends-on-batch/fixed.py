"""Three models whose eval output for one example depends on that example alone.

* The tabular classifier standardises its features with statistics of the training set,
  computed once and kept as buffers.
* The sensor model's helper reorders conv features with `permute(2, 0, 1)`, so every
  column of the sequence-first LSTM's input is one example.
* The Hugging Face-style text encoder passes the padding mask to its attention
  (`key_padding_mask=attention_mask == 0`).
"""

from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES, CLASSES, CHANNELS, STEPS, VOCAB, DIM = 12, 3, 4, 20, 40, 32


def tabular_data(size: int = 256) -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(size, FEATURES, generator=generator) * 3 + 1
    return TensorDataset(inputs, (inputs[:, 0] > 1).long() + (inputs[:, 1] > 1).long())


class TabularClassifier(nn.Module):
    def __init__(self, features: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mean", features.mean(0))
        self.register_buffer("std", features.std(0))
        self.body = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x - self.mean) / (self.std + 1e-5)
        return self.body(x)


def make():
    torch.manual_seed(0)
    data = tabular_data()
    model = TabularClassifier(data.tensors[0])
    loader = DataLoader(data, batch_size=32, shuffle=True)
    return model, loader, nn.CrossEntropyLoss(), torch.optim.Adam(model.parameters(), lr=1e-3)


def sensor_data(size: int = 128) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    signals = torch.randn(size, CHANNELS, STEPS, generator=generator)
    return TensorDataset(signals, (signals[:, 0].cumsum(1)[:, -1] > 0).long())


class SensorModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(CHANNELS, 16, kernel_size=3, padding=1)
        self.lstm = nn.LSTM(16, 24)
        self.head = nn.Linear(24, 2)

    def _sequence_first(self, features: torch.Tensor) -> torch.Tensor:
        return features.permute(2, 0, 1)

    def _last_state(self, sequence: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(sequence)
        return out[-1]

    def forward(self, signals: torch.Tensor) -> torch.Tensor:
        return self.head(self._last_state(self._sequence_first(F.relu(self.conv(signals)))))


def make_helpers():
    torch.manual_seed(0)
    model = SensorModel()
    loader = DataLoader(sensor_data(), batch_size=16, shuffle=True)
    return {
        "model": model,
        "data": loader,
        "loss_fn": nn.CrossEntropyLoss(),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.05),
    }


def text_batches(count: int = 4, size: int = 8, length: int = 12) -> list[dict]:
    generator = torch.Generator().manual_seed(2)
    batches = []
    for _ in range(count):
        lengths = torch.randint(3, length + 1, (size,), generator=generator)
        lengths[0] = length
        ids = torch.randint(1, VOCAB, (size, length), generator=generator)
        mask = (torch.arange(length)[None] < lengths[:, None]).long()
        batches.append(
            {"input_ids": ids * mask, "attention_mask": mask, "labels": (ids[:, 0] % 2).long()}
        )
    return batches


class TextEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.attention = nn.MultiheadAttention(DIM, 4, batch_first=True)
        self.classifier = nn.Linear(DIM, 2)

    def encode(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(ids)
        padding = attention_mask == 0
        mixed, _ = self.attention(
            hidden, hidden, hidden, key_padding_mask=padding, need_weights=False
        )
        keep = attention_mask.unsqueeze(-1).float()
        return (hidden + mixed).mul(keep).sum(1) / keep.sum(1)

    def forward(self, input_ids, attention_mask, labels=None) -> SimpleNamespace:
        logits = self.classifier(self.encode(input_ids, attention_mask))
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return SimpleNamespace(loss=loss, logits=logits)


def train_step(model: nn.Module, batch: dict) -> torch.Tensor:
    return model(**batch).loss


def make_step():
    torch.manual_seed(0)
    model = TextEncoder()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return {"model": model, "data": text_batches(), "optimizer": optimizer, "step": train_step}


def main() -> None:
    for factory in (make, make_helpers, make_step):
        setup = factory()
        if isinstance(setup, tuple):
            setup = dict(zip(("model", "data", "loss_fn", "optimizer"), setup, strict=True))
        model, optimizer = setup["model"], setup["optimizer"]
        model.train()
        for _epoch in range(2):
            for batch in setup["data"]:
                optimizer.zero_grad()
                if "step" in setup:
                    loss = setup["step"](model, batch)
                else:
                    loss = setup["loss_fn"](model(batch[0]), batch[1])
                loss.backward()
                optimizer.step()
        model.eval()
        with torch.no_grad():
            batch = next(iter(setup["data"]))
            first = model(**batch).logits if "step" in setup else model(batch[0])
            if "step" in setup:  # a longer sentence joins: more padding for the others
                padded = {k: F.pad(v, (0, 8)) if v.dim() == 2 else v for k, v in batch.items()}
                other = model(**padded).logits
            else:  # other neighbours: copies of the last example
                other = model(batch[0][-1:].expand_as(batch[0]))
        print(f"{factory.__name__}: last example {first[-1]} vs {other[-1]} with other company")


if __name__ == "__main__":
    main()
