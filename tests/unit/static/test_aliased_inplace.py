"""TD227 inplace-reads-own-view: ``x -= x[:, :1]`` on a torch tensor."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_codes


def test_in_place_updates_reading_a_view_of_the_written_tensor_are_flagged() -> None:
    source = """
        import torch

        def centre(model, inputs):
            poses = model(inputs).cpu()
            poses[:, :, :] -= poses[:, :1, :]  # expect: TD227
            return poses

        coords = torch.randn(10, 4)
        coords /= coords[..., -1:]  # expect: TD227
        rows = torch.zeros(5, 3)
        rows -= rows[0]  # expect: TD227
        """
    assert_marked(source, "TD227")


def test_copies_partial_targets_and_arrays_stay_quiet() -> None:
    source = """
        import numpy as np
        import torch

        x = torch.randn(10, 4)
        x -= x[:, :1].clone()
        x -= x.mean(dim=1, keepdim=True)
        x[:, 1:] -= x[:, :1]
        x = x - x[:, :1]
        x -= x[torch.tensor([0, 1])]
        a = np.zeros((10, 4))
        a -= a[:, :1]

        def f(batch):
            batch -= batch[:, :1]
        """
    assert lint_codes(source, "TD227") == []
