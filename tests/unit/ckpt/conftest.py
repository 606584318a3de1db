"""Small models and checkpoint writers shared by the ckpt unit tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn


class Encoder(nn.Module):
    """The current architecture: ``encoder`` + ``head`` + a BatchNorm buffer set."""

    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
        self.norm = nn.BatchNorm1d(8)
        self.head = nn.Linear(8, classes)


class Backbone(nn.Module):
    """The same network before a refactor renamed ``backbone`` to ``encoder``."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
        self.norm = nn.BatchNorm1d(8)
        self.head = nn.Linear(8, 3)


def digest(path: Path) -> str:
    """SHA-256 of a file, to prove it was not modified."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def model() -> nn.Module:
    torch.manual_seed(0)
    return Encoder()


@pytest.fixture
def save(tmp_path: Path):
    """``save(obj, name="ckpt.pt", **torch_save_kwargs) -> Path`` into a temp dir."""

    def write(obj: object, name: str = "ckpt.pt", **kwargs: object) -> Path:
        path = tmp_path / name
        torch.save(obj, path, **kwargs)
        return path

    return write
