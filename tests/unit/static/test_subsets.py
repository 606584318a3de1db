"""TD417 subset-transform-misapplied: a transform given to one part of a split."""

from __future__ import annotations

import pytest

from tests.unit.static.helpers import assert_marked, lint_findings


@pytest.mark.parametrize(
    "split",
    [
        "train_set, val_set = random_split(full, [0.9, 0.1])",
        "train_set, val_set = torch.utils.data.random_split(full, [900, 100])",
        "[train_set, val_set] = data.random_split(full, lengths)",
    ],
)
def test_a_transform_set_through_the_shared_dataset_is_flagged(split: str) -> None:
    source = f"""
    import torch
    from torch.utils import data
    from torch.utils.data import random_split
    def loaders(full, val_tf, lengths):
        {split}
        val_set.dataset.transform = val_tf  # expect: TD417
        return train_set, val_set
    """
    assert_marked(source, "TD417")
    (found,) = lint_findings(source, "TD417")
    assert "`train_set` now returns samples made by `val_tf`" in found.message
    assert "training loses its augmentation" in found.message and found.fix_hint


def test_a_transform_set_on_the_subset_itself_is_flagged() -> None:
    source = """
    from torch.utils.data import Subset, random_split
    def split(full, order, val_tf, test_tf):
        train_set, val_set, test_set = random_split(full, [0.8, 0.1, 0.1])
        val_set.transform = val_tf  # expect: TD417
        test_set.target_transform = test_tf  # expect: TD417
    class Data:
        def setup(self, full, order):
            self.train = Subset(full, order[:900])
            self.val = Subset(full, order[900:])
        def set_transforms(self, tf):
            self.val.transforms = tf  # expect: TD417
            self.val.dataset.transform = tf  # expect: TD417
    """
    assert_marked(source, "TD417")
    messages = [f.message for f in lint_findings(source, "TD417")]
    assert "sets an attribute that `Subset` never reads" in messages[0]
    assert "`val_set` comes from `random_split(...)` at line 4" in messages[0]


def test_parts_with_datasets_of_their_own_are_quiet() -> None:
    source = """
    import copy
    from torch.utils.data import Subset, random_split
    def copied(full, val_tf):
        train_set, val_set = random_split(full, [0.8, 0.2])
        val_set.dataset = copy.deepcopy(full)
        val_set.dataset.transform = val_tf
    def one_part(full, tf):
        small, _ = random_split(full, [0.1, 0.9])
        small.dataset.transform = tf
    def two_datasets(train_full, val_full, order, tf):
        train_set = Subset(train_full, order[:90])
        val_set = Subset(val_full, order[90:])
        val_set.dataset.transform = tf
    def before_the_split(full, tf):
        full.transform = tf
        train_set, val_set = random_split(full, [0.8, 0.2])
    def plain_dataset(train_set, tf):
        train_set.transform = tf
    def part_copied_whole(full, val_tf):
        train, val = random_split(full, [0.8, 0.2])
        val = copy.deepcopy(val)  # torch-uncertainty: the copy brings its own dataset
        val.dataset.transform = val_tf
    def shallow_copy(full, val_tf):
        train, val = random_split(full, [0.8, 0.2])
        val = copy.copy(val)
        val.dataset.transform = val_tf  # expect: TD417
    """
    assert_marked(source, "TD417")


@pytest.mark.parametrize(
    ("val_transform", "flagged"),
    [
        # kraken: both parts are given the one same transform object
        ("transforms", False),
        # the validation part is given another transform: the last one wins for both
        ("eval_transforms", True),
    ],
)
def test_td417_the_same_transform_set_through_every_part_is_quiet(
    val_transform: str, flagged: bool
) -> None:
    mark = "  # expect: TD417" if flagged else ""
    source = f"""
import torch
from torch.utils.data import random_split

class Data:
    def __init__(self, full):
        self.train_set, self.val_set = random_split(full, [0.9, 0.1])

    def setup(self, transforms, eval_transforms):
        self.train_set.dataset.transforms = transforms{mark}
        self.val_set.dataset.transforms = {val_transform}{mark}
"""
    assert_marked(source, "TD417")
