"""A sentiment classifier; the loop reads the same "label" key the dataset yields."""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB, LENGTH = 100, 12


class Reviews(Dataset):
    def __init__(self, size: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, VOCAB, (size, LENGTH), generator=generator)
        self.labels = torch.randint(0, 2, (size,), generator=generator)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"ids": self.ids[index], "label": self.labels[index]}


def main() -> None:
    torch.manual_seed(0)
    loader = DataLoader(Reviews(256), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.EmbeddingBag(VOCAB, 16), nn.Linear(16, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        for batch in loader:
            logits = model(batch["ids"])
            loss = nn.functional.cross_entropy(logits, batch["label"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
