"""Shared test fixtures: repository paths and a torch-availability marker."""

from __future__ import annotations

import importlib.util
import os
import random
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "examples" / "lab"

HAS_TORCH = importlib.util.find_spec("torch") is not None

FUZZ_SEED_VARIABLE = "TORCHDOCTOR_FUZZ_SEED"


def pytest_configure(config: pytest.Config) -> None:
    # The fresh-seed fuzzers name their seed in their test ids, and pytest-xdist needs every
    # worker to collect the same ids: draw the seed once, in the controlling process, whose
    # environment the workers inherit.
    if not os.environ.get(FUZZ_SEED_VARIABLE):
        os.environ[FUZZ_SEED_VARIABLE] = str(random.SystemRandom().randrange(2**32))


def pytest_report_header(config: pytest.Config) -> str:
    return f"fuzz seed: {FUZZ_SEED_VARIABLE}={os.environ.get(FUZZ_SEED_VARIABLE)}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_TORCH:
        return
    skip = pytest.mark.skip(reason="needs PyTorch")
    for item in items:
        if "needs_torch" in item.keywords:
            item.add_marker(skip)
