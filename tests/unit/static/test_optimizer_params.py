"""TD603 duplicate-parameters-in-optimizer."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_findings


def test_a_module_given_twice_is_flagged_with_the_untrained_sibling() -> None:
    source = """
        import itertools
        import torch
        from torch import nn

        class GAN(nn.Module):
            def __init__(self):
                super().__init__()
                self.generator = nn.Linear(4, 4)
                self.disc_a = nn.Linear(4, 1)
                self.disc_b = nn.Linear(4, 1)

            def optimizers(self):
                params = list(self.disc_a.parameters()) + list(self.disc_a.parameters())
                return (
                    torch.optim.Adam(self.generator.parameters()),
                    torch.optim.Adam(params),  # expect: TD603
                )

        def groups(model):
            return torch.optim.SGD(  # expect: TD603
                [{"params": model.encoder.parameters()}, {"params": model.encoder.parameters()}],
                lr=0.1,
            )

        def chained(enc, dec):
            both = itertools.chain(enc.parameters(), enc.parameters())
            return torch.optim.Adam(both)  # expect: TD603
        """
    assert_marked(source, "TD603")
    found = lint_findings(source, "TD603")[0]
    assert found.evidence == {"repeated": "self.disc_a", "untrained": ["self.disc_b"]}
    assert "`self.disc_b` of the same owner is in no optimizer" in found.message


def test_split_groups_and_distinct_modules_are_quiet() -> None:
    source = """
        import torch

        def decay_groups(model):
            decay = [p for n, p in model.named_parameters() if "bias" not in n]
            no_decay = [p for n, p in model.named_parameters() if "bias" in n]
            return torch.optim.AdamW(
                [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]
            )

        def filtered(model):
            return torch.optim.SGD(
                [
                    {"params": filter(lambda p: p.ndim > 1, model.parameters())},
                    {"params": filter(lambda p: p.ndim <= 1, model.parameters()), "lr": 0.01},
                ],
                lr=0.1,
            )

        def both(enc, dec):
            return torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()))
        """
    assert_marked(source, "TD603")


def test_different_parts_of_one_container_are_distinct_and_a_whole_overlaps_its_part() -> None:
    """Cream's CDARTS gives ``super_layers[layer_idx]`` (its own learning rate) and
    ``super_layers[layer_idx + 1:]``: two different parts of one ModuleList. The whole
    container beside one of its items gives that item's parameters twice."""
    source = """
        import torch

        def stages(net, idx, lr):
            return torch.optim.SGD(
                [
                    {"params": net.super_layers[idx].parameters(), "lr": lr},
                    {"params": net.super_layers[idx + 1 :].parameters()},
                    {"params": net.blocks[0].parameters()},
                    {"params": net.blocks[1].parameters()},
                ],
                lr=0.1,
            )

        def overlapping(net):
            return torch.optim.SGD(  # expect: TD603
                [{"params": net.layers.parameters()}, {"params": net.layers[0].parameters()}],
                lr=0.1,
            )

        def twice(net):
            return torch.optim.SGD(  # expect: TD603
                [{"params": net.layers[0].parameters()}, {"params": net.layers[0].parameters()}],
                lr=0.1,
            )
        """
    assert_marked(source, "TD603")
    messages = [f.message for f in lint_findings(source, "TD603")]
    assert all("`net.layers.parameters()`" in m for m in messages)


def test_a_module_beside_its_own_submodule_repeats_the_submodule() -> None:
    """Popular-RL-Algorithms' SDT PPO: ``list(self.parameters()) +
    list(self.sdt.parameters())`` where ``self.sdt`` is a submodule of ``self``."""
    source = """
        import torch
        from torch import nn

        class Agent(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.sdt = nn.Linear(4, 2)
                self.optimizer = torch.optim.Adam(  # expect: TD603
                    list(self.parameters()) + list(self.sdt.parameters()), lr=1e-3
                )
        """
    assert_marked(source, "TD603")


def test_slices_of_one_parameter_list_split_it() -> None:
    """OpenOOD's ISH trainer: all parameters but the last two in one group, the last two
    (the classifier) with their own weight decay. A whole module beside a slice of it
    still repeats parameters."""
    source = """
        import torch

        def split(net, wd):
            return torch.optim.SGD(
                [
                    {"params": list(net.parameters())[:-2]},
                    {"params": list(net.parameters())[-2:], "weight_decay": wd},
                ],
                lr=0.1,
            )

        def repeated(net):
            return torch.optim.SGD(  # expect: TD603
                [{"params": net.parameters()}, {"params": net.parameters(), "lr": 0.01}],
                lr=0.1,
            )
        """
    assert_marked(source, "TD603")
