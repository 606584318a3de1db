"""Shared test fixtures: repository paths and a torch-availability marker."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "examples" / "lab"

HAS_TORCH = importlib.util.find_spec("torch") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_TORCH:
        return
    skip = pytest.mark.skip(reason="needs PyTorch")
    for item in items:
        if "needs_torch" in item.keywords:
            item.add_marker(skip)
