"""Runtime tests train tiny models: one torch thread each.

With several test processes on a few cores, torch's default thread pool oversubscribes
the machine and a 1 ms step can take 100 ms; one thread per process keeps steps fast and
timings meaningful.
"""

from __future__ import annotations

import importlib.util

import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> None:
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.set_num_threads(1)
