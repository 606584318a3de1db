"""TD410 at lint: a Dataset's own generator copied into every DataLoader worker."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_codes

DATASET = """
import random
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

class Crops(Dataset):
    def __init__(self, volumes, seed=0):
        self.volumes = volumes
        self.random_state = np.random.RandomState(seed)

    def __len__(self):
        return len(self.volumes)

    def __getitem__(self, i):
        offset = self.random_state.randint(0, 8)
        return self.volumes[i][offset:offset + 16]

class Jitter(Dataset):
    def __init__(self, n):
        self.n = n
        self.rng = random.Random()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.tensor(self.rng.random())

class Global(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.tensor(np.random.rand())
"""


def test_workers_over_a_dataset_with_its_own_generator_are_flagged() -> None:
    source = (
        DATASET
        + """
def main(volumes, args):
    a = DataLoader(Crops(volumes), batch_size=4, num_workers=2)  # expect: TD410
    b = DataLoader(Jitter(100), num_workers=args.workers)  # expect: TD410
"""
    )
    assert_marked(source, "TD410")


def test_no_workers_a_worker_init_fn_or_the_global_generators_stay_quiet() -> None:
    source = (
        DATASET
        + """
def reseed(worker_id):
    info = torch.utils.data.get_worker_info()
    info.dataset.random_state = np.random.RandomState(info.seed % 2**32)

def main(volumes):
    a = DataLoader(Crops(volumes), batch_size=4)
    b = DataLoader(Crops(volumes), num_workers=2, worker_init_fn=reseed)
    c = DataLoader(Global(10), num_workers=4)
"""
    )
    assert lint_codes(source, "TD410") == []
