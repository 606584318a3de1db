"""Shared test fixtures: repository paths and a torch-availability marker."""

from __future__ import annotations

import importlib.util
import os
import random
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "examples" / "lab"

HAS_TORCH = importlib.util.find_spec("torch") is not None

FUZZ_SEED_VARIABLE = "TORCHDOCTOR_FUZZ_SEED"
# Added to every test's own seed; set it to run the suite on other random draws.
TEST_SEED_SALT = int(os.environ.get("TORCHDOCTOR_TEST_SEED_SALT") or 0)

# A report fact written under an undeclared key or with the wrong type raises in every test
# (and in the subprocesses tests start, which inherit it); see torchdoctor.facts.
os.environ.setdefault("TORCHDOCTOR_STRICT_FACTS", "1")


def pytest_configure(config: pytest.Config) -> None:
    # The fresh-seed fuzzers name their seed in their test ids, and pytest-xdist needs every
    # worker to collect the same ids: draw the seed once, in the controlling process, whose
    # environment the workers inherit.
    if not os.environ.get(FUZZ_SEED_VARIABLE):
        os.environ[FUZZ_SEED_VARIABLE] = str(random.SystemRandom().randrange(2**32))


@pytest.fixture(autouse=True)
def _seeded_generators(request: pytest.FixtureRequest) -> None:
    # Each test starts from a seed of its own, so a model's random initial weights do not
    # depend on which tests an xdist worker happened to run before it.
    seed = (zlib.crc32(request.node.nodeid.encode()) + TEST_SEED_SALT) % 2**32
    random.seed(seed)
    numpy, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    if numpy is not None:
        numpy.random.seed(seed)
    if torch is not None:
        torch.manual_seed(seed)


def pytest_report_header(config: pytest.Config) -> str:
    return (
        f"fuzz seed: {FUZZ_SEED_VARIABLE}={os.environ.get(FUZZ_SEED_VARIABLE)}, "
        f"test seed salt: {TEST_SEED_SALT}"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_TORCH:
        return
    skip = pytest.mark.skip(reason="needs PyTorch")
    for item in items:
        if "needs_torch" in item.keywords:
            item.add_marker(skip)
