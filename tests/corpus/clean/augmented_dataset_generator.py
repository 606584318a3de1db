"""Map-style Dataset with per-item augmentation from a seeded torch.Generator.

Each item's augmentation is derived from a per-epoch generator seeded by (epoch, index),
so runs are reproducible and workers never repeat each other. A `collate_fn` pads
variable-length signals into a batch. Loaded in the main process (num_workers=0).
"""

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset


class Signals(Dataset):
    def __init__(self, size=200):
        generator = torch.Generator().manual_seed(25)
        self.labels = torch.randint(0, 2, (size,), generator=generator)
        self.lengths = torch.randint(20, 41, (size,), generator=generator)
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(self.epoch * 100_003 + index)
        length = int(self.lengths[index])
        time = torch.linspace(0, 1, length)
        frequency = 2.0 if self.labels[index] == 0 else 5.0
        phase = torch.rand((), generator=generator) * 6.28
        signal = torch.sin(6.28 * frequency * time + phase)
        signal = signal * (0.8 + 0.4 * torch.rand((), generator=generator))
        signal = signal + 0.1 * torch.randn(length, generator=generator)
        return signal, self.labels[index]


def collate(items):
    signals, labels = zip(*items)
    return pad_sequence(list(signals), batch_first=True).unsqueeze(1), torch.stack(labels)


class ConvClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(1, 16, 5, padding=2), nn.ReLU(),
                                 nn.Conv1d(16, 16, 5, padding=2), nn.ReLU(),
                                 nn.AdaptiveMaxPool1d(1), nn.Flatten(), nn.Linear(16, 2))

    def forward(self, x):
        return self.net(x)


def main():
    torch.manual_seed(0)
    dataset = Signals()
    loader = DataLoader(dataset, batch_size=25, shuffle=True, collate_fn=collate)
    model = ConvClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        dataset.set_epoch(epoch)
        for signals, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(signals), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
