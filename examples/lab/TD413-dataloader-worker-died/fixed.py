"""Images decoded inside DataLoader workers; corrupt files are found and skipped first.

Files are validated (their header checked) when the dataset is built, so the native
decoder never sees a damaged file and no worker can crash on one.
"""

import ctypes

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

MAGIC = b"IMG0"


def make_files(count: int, corrupt: set[int]) -> list[bytes]:
    generator = torch.Generator().manual_seed(0)
    files = []
    for index in range(count):
        pixels = torch.randint(0, 256, (3 * 8 * 8,), generator=generator, dtype=torch.uint8)
        header = b"BAD!" if index in corrupt else MAGIC
        files.append(header + bytes(pixels.tolist()))
    return files


def decode(blob: bytes) -> torch.Tensor:
    if blob[:4] != MAGIC:  # a damaged header sends the native decoder to address 0
        ctypes.string_at(0)
    pixels = torch.frombuffer(bytearray(blob[4:]), dtype=torch.uint8)
    return pixels.view(3, 8, 8).float() / 255


class ImageFiles(Dataset):
    def __init__(self, files: list[bytes]) -> None:
        self.files = [blob for blob in files if blob[:4] == MAGIC]

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return decode(self.files[index]), index % 4


def main() -> None:
    torch.manual_seed(0)
    dataset = ImageFiles(make_files(256, corrupt={77}))
    loader = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for images, labels in loader:
            loss = nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
