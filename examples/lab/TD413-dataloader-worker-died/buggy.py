"""Images decoded by a native decoder inside DataLoader workers; one file is corrupt.

`decode` stands in for a C image decoder: given a file whose header is damaged it reads
from a null pointer, exactly as a real decoder does on a bad length field, and the worker
process dies of a segmentation fault. The main process only sees "DataLoader worker
(pid ...) is killed by signal: Segmentation fault".
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
        self.files = files

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
        for images, labels in loader:  # expect[run]: TD413
            loss = nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
