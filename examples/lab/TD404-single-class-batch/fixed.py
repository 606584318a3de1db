"""A plant-species classifier whose class-ordered dataset is shuffled every epoch."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES, SPECIES, PER_SPECIES = 4, 3, 128


class SpeciesModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 16), nn.ReLU(), nn.Linear(16, SPECIES))

    def forward(self, measurements: torch.Tensor) -> torch.Tensor:
        return self.body(measurements)


def load_species_files() -> TensorDataset:
    """One file per species, concatenated in order: all of class 0, then 1, then 2."""
    generator = torch.Generator().manual_seed(1)
    centres = torch.randn(SPECIES, FEATURES, generator=generator) * 2
    measurements = torch.cat([centres[s] + torch.randn(PER_SPECIES, FEATURES,
                                                       generator=generator)
                              for s in range(SPECIES)])
    labels = torch.arange(SPECIES).repeat_interleave(PER_SPECIES)
    return TensorDataset(measurements, labels)


def make():
    torch.manual_seed(0)
    loader = DataLoader(load_species_files(), batch_size=32, shuffle=True)
    model = SpeciesModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for measurements, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(measurements), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: last batch loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
