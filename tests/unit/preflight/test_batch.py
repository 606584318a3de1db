"""Batches: accepted shapes, how the model is called, moving between devices."""

from __future__ import annotations

from collections import namedtuple

import pytest

torch = pytest.importorskip("torch")

from torchdoctor.errors import UsageError  # noqa: E402
from torchdoctor.preflight.batch import CallStyle, iter_tensors, move_to, split_batch  # noqa: E402

pytestmark = pytest.mark.needs_torch


def test_pair_calls_the_model_with_one_argument() -> None:
    x, y = torch.ones(2, 3), torch.zeros(2)
    batch = split_batch((x, y))
    assert batch.style is CallStyle.ONE and batch.targets is y
    assert batch.call(lambda inputs: inputs) is x


def test_longer_tuple_passes_all_but_the_last_positionally() -> None:
    x, lengths, y = torch.ones(2, 3), torch.tensor([3, 2]), torch.zeros(2)
    batch = split_batch([x, lengths, y])
    assert batch.call(lambda a, b: (a, b)) == (x, lengths) and batch.targets is y


def test_tuple_of_inputs_is_unpacked() -> None:
    a, b, y = torch.ones(1), torch.zeros(1), torch.ones(1)
    assert split_batch(((a, b), y)).call(lambda first, second: second) is b


def test_dict_with_labels_passes_the_rest_as_keywords() -> None:
    raw = {
        "input_ids": torch.ones(2, 4),
        "attention_mask": torch.ones(2, 4),
        "labels": torch.zeros(2),
    }
    batch = split_batch(raw)
    assert batch.style is CallStyle.KWARGS and batch.targets is raw["labels"]
    assert batch.call(lambda **kw: sorted(kw)) == ["attention_mask", "input_ids"]


def test_dict_with_an_inputs_key_uses_it() -> None:
    raw = {"inputs": torch.ones(2), "targets": torch.zeros(2), "index": torch.arange(2)}
    assert split_batch(raw).call(lambda x: x) is raw["inputs"]


@pytest.mark.parametrize("raw", [torch.ones(3), (torch.ones(3),), {"x": torch.ones(3)}])
def test_unsplittable_batches_say_what_is_accepted(raw) -> None:
    with pytest.raises(UsageError, match="targets"):
        split_batch(raw)


def test_move_keeps_structure_and_namedtuples() -> None:
    Pair = namedtuple("Pair", "left right")
    moved = move_to({"a": [torch.ones(1)], "b": Pair(torch.ones(1), 3)}, "meta")
    assert moved["a"][0].device.type == "meta" and isinstance(moved["b"], Pair)
    assert moved["b"].right == 3


def test_iter_tensors_names_nested_tensors() -> None:
    names = [n for n, _ in iter_tensors({"ids": torch.ones(1), "extra": [torch.ones(1)]}, "inputs")]
    assert names == ["inputs['ids']", "inputs['extra'][0]"]


def test_a_list_of_batches_is_a_loader_and_a_pair_list_is_a_batch() -> None:
    from torchdoctor.preflight.batch import is_batch

    pair = [torch.ones(2, 3), torch.zeros(2)]
    assert is_batch(pair) and is_batch(tuple(pair)) and is_batch({"x": 1, "y": 2})
    assert not is_batch([tuple(pair), tuple(pair)])
    assert not is_batch(torch.utils.data.DataLoader([(1, 2)]))
