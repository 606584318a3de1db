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


FALLBACK = """
import random
import numpy as np
from torch.utils.data import DataLoader, Dataset

class Mapped(Dataset):
    def __init__(self, items, load):
        self.items, self.load = items, load
        self.rng = random.Random(42)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        cur = int(idx)
        while True:
            sample = self.load(self.items, cur)
            if sample is not None:
                return sample
            cur = self.rng.randrange(len(self.items))

class Retried(Dataset):
    def __init__(self, paths):
        self.paths = paths
        self.rng = np.random.default_rng(0)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, idx):
        for _ in range(3):
            try:
                return open(self.paths[idx]).read()
            except OSError:
                idx = self.rng.integers(len(self))
        raise RuntimeError(idx)

class Checked(Dataset):
    def __init__(self, paths, read):
        self.paths, self.read = paths, read
        self.rng = random.Random(0)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, idx):
        ok, frame = self.read(self.paths[idx])
        if not ok:
            frame = self.read(self.paths[self.rng.randrange(len(self))])[1]
        return frame
"""


def test_a_generator_drawn_only_to_replace_a_failed_sample_stays_quiet() -> None:
    """detectron2's MapDataset (copied as detrex's MotMapDataset): the generator picks
    another index only after the mapper returned None for this one."""
    source = (
        FALLBACK
        + """
def main(items, load, paths, read):
    a = DataLoader(Mapped(items, load), batch_size=4, num_workers=4)
    b = DataLoader(Retried(paths), num_workers=2)
    c = DataLoader(Checked(paths, read), num_workers=2)
"""
    )
    assert lint_codes(source, "TD410") == []


def test_a_draw_on_the_normal_path_beside_a_fallback_draw_is_still_flagged() -> None:
    """A flip on the success path, an index drawn for every item, and a crop drawn after a
    cache hit's early return (outside a retry loop that is the normal path) are all
    augmentations every worker repeats."""
    source = """
import random
from torch.utils.data import DataLoader, Dataset

class Flipped(Dataset):
    def __init__(self, items, load):
        self.items, self.load = items, load
        self.rng = random.Random(42)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        while True:
            sample = self.load(self.items, idx)
            if sample is not None:
                if self.rng.random() < 0.5:
                    sample = sample[::-1]
                return sample
            idx = self.rng.randrange(len(self.items))

class Sampled(Dataset):
    def __init__(self, items, training):
        self.items, self.training = items, training
        self.rng = random.Random(0)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        if not self.training:
            return self.items[idx]
        try:
            return self.items[self.rng.randrange(len(self.items))]
        except IndexError:
            return self.items[self.rng.randrange(len(self.items))]

class Cached(Dataset):
    def __init__(self, items):
        self.items, self.cache = items, {}
        self.rng = random.Random(0)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        cached = self.cache.get(idx)
        if cached is not None:
            return cached
        crop = self.rng.randrange(8)
        return self.items[idx][crop:]

def main(items, load):
    a = DataLoader(Flipped(items, load), num_workers=4)  # expect: TD410
    b = DataLoader(Sampled(items, True), num_workers=4)  # expect: TD410
    c = DataLoader(Cached(items), num_workers=4)  # expect: TD410
"""
    assert_marked(source, "TD410")
