"""TD416 sampler-never-used."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_findings


def test_a_sampler_chosen_after_the_loader_was_built_is_flagged() -> None:
    source = """
        import torch
        from torch.utils.data import DataLoader, WeightedRandomSampler

        def main(dataset, weights, rule, epochs):
            train_sampler = None
            loader = DataLoader(dataset, shuffle=train_sampler is None, sampler=train_sampler)
            for epoch in range(epochs):
                if rule == "resample":
                    train_sampler = WeightedRandomSampler(weights, len(weights))  # expect: TD416
                for batch in loader:
                    pass
        """
    assert_marked(source, "TD416")
    (found,) = lint_findings(source, "TD416")
    assert "the DataLoader at line 7 was built with `sampler=train_sampler`" in found.message
    assert found.evidence == {"loader_line": 7}


def test_samplers_of_a_package_or_the_project_by_class() -> None:
    source = """
        import torch
        from torchsampler import ImbalancedDatasetSampler

        class BalancedSampler(torch.utils.data.Sampler):
            pass

        class NegativeEdgeSampler:
            def sample(self, size):
                return size

        def main(dataset):
            sampler = ImbalancedDatasetSampler(dataset)  # expect: TD416
            balanced = BalancedSampler(dataset)  # expect: TD416
            edges = NegativeEdgeSampler()
            return torch.utils.data.DataLoader(dataset)
        """
    assert_marked(source, "TD416")


def test_a_sampler_built_on_a_model_is_no_data_sampler() -> None:
    """Diff-Pruning's profiling scripts build latent diffusion's ``DDIMSampler(model)``
    and never use it: a sampler of images from a model, not of examples for a loader;
    so is StableSR's ``DDIMSampler(self)`` in a method of the model. One built on the
    dataset, or on a dataset's ``self``, is still a data sampler."""
    source = """
        import torch
        from ldm.models.diffusion.ddim import DDIMSampler
        from samplers import PLMSSampler, ClassBalancedSampler

        def profile(path, dataset, unet):
            model = torch.load(path, map_location="cpu")
            sampler = DDIMSampler(model)
            plms = PLMSSampler(model=unet)
            balanced = ClassBalancedSampler(dataset)  # expect: TD416
            return model

        class LatentDiffusion(torch.nn.Module):
            def forward(self, x):
                return x

        class SuperResolution(LatentDiffusion):
            def log_images(self, batch):
                sampler = DDIMSampler(self)
                return batch

        class Shards(torch.utils.data.Dataset):
            def loader(self):
                sampler = ClassBalancedSampler(self)  # expect: TD416
                return torch.utils.data.DataLoader(self)
        """
    assert_marked(source, "TD416")


def test_samplers_that_are_used_stay_quiet() -> None:
    source = """
        import torch
        from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

        SHARED = RandomSampler(range(10))

        def loader_for(dataset, distributed):
            sampler = DistributedSampler(dataset) if distributed else None
            if distributed:
                sampler = DistributedSampler(dataset, shuffle=True)
            return DataLoader(dataset, sampler=sampler)

        def epochs(dataset, n):
            for epoch in range(n):
                if epoch:
                    for batch in DataLoader(dataset, sampler=sampler):
                        pass
                sampler = RandomSampler(dataset)

        def uses_shared():
            return list(SHARED)

        def closure(dataset):
            sampler = RandomSampler(dataset)
            return lambda: DataLoader(dataset, sampler=sampler)
        """
    assert_marked(source, "TD416")


def test_one_unused_name_bound_in_both_branches_is_one_finding() -> None:
    # The weighted and the plain sampler are chosen, then the loader is given a fresh one:
    # one mistake, so one finding at the first binding that names the other.
    source = """
        from torch.utils.data import DataLoader, RandomSampler, WeightedRandomSampler

        def loaders(dataset, weights, skew, workers):
            if skew:
                base_sampler = WeightedRandomSampler(weights, len(weights))  # expect: TD416
            else:
                base_sampler = RandomSampler(dataset)
            return DataLoader(dataset, sampler=RandomSampler(dataset), num_workers=workers)
        """
    assert_marked(source, "TD416")
    (found,) = lint_findings(source, "TD416")
    assert "(nor the one bound to `base_sampler` at line 8)" in found.message
    assert found.evidence == {"other_lines": [8]}


def test_a_sampler_built_for_a_later_loader_that_takes_none_names_that_loader() -> None:
    """LibFewShot: the sampler built for the auxiliary loader, which shuffles instead of
    taking it. The message names that loader, not the earlier one that got another
    sampler under the same name."""
    source = """
        from torch.utils.data import DataLoader, DistributedSampler

        def loaders(dataset, episodes):
            sampler = episodes(dataset)
            loader = DataLoader(dataset, batch_sampler=sampler)
            sampler = DistributedSampler(dataset, shuffle=True)  # expect: TD416
            aux = DataLoader(dataset, batch_size=32, shuffle=True)
            return loader, aux
        """
    assert_marked(source, "TD416")
    (found,) = lint_findings(source, "TD416")
    assert "the DataLoader built after it at line 8 is given no sampler" in found.message
    assert found.evidence == {"loader_line": 8}
