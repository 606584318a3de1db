"""TD505 momentum-passed-as-eps: a momentum in the positional `eps` slot of a norm layer."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_findings

# -- flagged: three ways code arranges it ----------------------------------------------------


def test_a_literal_in_a_sequential_is_flagged() -> None:
    assert_marked(
        """
        import torch.nn as nn
        model = nn.Sequential(
            nn.Conv2d(3, 64, 3),
            nn.BatchNorm2d(64, 0.8),  # expect: TD505
            nn.ReLU(),
        )
        """,
        "TD505",
    )


def test_a_block_building_helper_is_flagged() -> None:
    assert_marked(
        """
        from torch import nn

        def block(in_feat, out_feat, normalize=True):
            layers = [nn.Linear(in_feat, out_feat)]
            if normalize:
                layers.append(nn.BatchNorm1d(out_feat, 0.8))  # expect: TD505
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers
        """,
        "TD505",
    )


def test_a_value_named_for_the_momentum_is_flagged() -> None:
    assert_marked(
        """
        import torch

        BN_DECAY = 0.99

        class Stem(torch.nn.Module):
            def __init__(self, cfg, channels):
                super().__init__()
                self.bn1 = torch.nn.BatchNorm2d(channels, cfg.bn_momentum)  # expect: TD505
                self.bn2 = torch.nn.SyncBatchNorm(channels, BN_DECAY)  # expect: TD505
                self.norm = torch.nn.InstanceNorm1d(channels, 0.5)  # expect: TD505
        """,
        "TD505",
    )


def test_the_finding_names_the_layer_and_the_value() -> None:
    [found] = lint_findings("import torch.nn as nn\nbn = nn.BatchNorm2d(128, 0.8)\n", "TD505")
    assert "BatchNorm2d" in found.message and "0.8" in found.message
    assert "momentum=0.8" in found.fix_hint and found.evidence["eps"] == 0.8


# -- quiet: epsilons, keywords, other layers --------------------------------------------------


def test_real_epsilons_passed_by_position_are_quiet() -> None:
    assert_marked(
        """
        import torch.nn as nn
        a = nn.BatchNorm2d(64, 1e-3)
        b = nn.BatchNorm2d(64, 0.001, 0.03)
        c = nn.BatchNorm1d(32, 1e-5, 0.1, True, True)
        d = nn.BatchNorm2d(64, 0.01)
        """,
        "TD505",
    )


def test_keyword_arguments_are_a_choice() -> None:
    assert_marked(
        """
        import torch.nn as nn
        a = nn.BatchNorm2d(64, momentum=0.8)
        b = nn.BatchNorm2d(64, eps=0.1)
        c = nn.BatchNorm2d(num_features=64, eps=0.5)
        """,
        "TD505",
    )


def test_variables_named_for_eps_or_forwarded_are_quiet() -> None:
    assert_marked(
        """
        import torch.nn as nn

        class SplitBatchNorm(nn.BatchNorm2d):
            def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True):
                super().__init__(num_features, eps, momentum, affine)
                self.aux = nn.BatchNorm2d(num_features, eps, momentum, affine)

        def make(channels, bn_eps=0.5, *rest):
            return nn.BatchNorm2d(channels, bn_eps), nn.BatchNorm2d(channels, *rest)
        """,
        "TD505",
    )


def test_other_layers_and_other_libraries_are_quiet() -> None:
    assert_marked(
        """
        import torch.nn as nn
        from mylib import BatchNorm2d

        a = nn.GroupNorm(8, 64, 0.8)
        b = nn.LayerNorm(64, 0.8)
        c = BatchNorm2d(64, 0.8)
        d = nn.LazyBatchNorm2d(1e-5, 0.8)
        e = nn.Dropout(0.8)
        """,
        "TD505",
    )
