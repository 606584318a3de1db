"""Lint rules TD405, TD406, TD407, TD408: data loading."""

from __future__ import annotations

import pytest

from tests.unit.static.helpers import lint_codes, lint_findings
from tests.unit.static.test_loss import applied
from torchdoctor.findings import Applicability, Confidence, Severity

# --- TD405 dataloader-workers-without-main-guard ---------------------------------------------


def test_loader_with_workers_used_at_module_level_without_guard_is_flagged() -> None:
    source = """
        from torch.utils.data import DataLoader as DL

        WORKERS = 4
        loader = DL(dataset, batch_size=32, num_workers=WORKERS)
        for batch in loader:
            pass
        """
    [found] = lint_findings(source, "TD405")
    assert found.location.line == 5
    assert "at module level" in found.message and "bootstrapping phase" in found.message
    assert found.confidence is Confidence.HIGH


def test_loader_in_a_function_that_module_level_code_calls_is_flagged() -> None:
    source = """
        import torch

        def make_loader(dataset, workers):
            return torch.utils.data.DataLoader(dataset, num_workers=workers)

        def main(args):
            for x in make_loader(args.dataset, args.workers):
                pass

        main(parse_args())
        """
    [found] = lint_findings(source, "TD405")
    assert found.location.line == 5
    assert "`make_loader()`" in found.message
    assert found.confidence is Confidence.MEDIUM  # num_workers known only at run time


def test_a_class_built_at_module_level_runs_its_constructor() -> None:
    source = """
        from torch.utils.data import DataLoader

        class Trainer:
            def __init__(self, dataset):
                self.loader = DataLoader(dataset, num_workers=2)

        trainer = Trainer(dataset)
        """
    assert lint_codes(source, "TD405") == [("TD405", 6)]


def test_one_finding_per_unguarded_script_names_every_loader() -> None:
    """Every loader of an unguarded script fails for the one missing guard: one finding,
    at the first loader, naming the others."""
    source = """
        from torch.utils.data import DataLoader

        train = DataLoader(train_set, num_workers=4)
        test = DataLoader(test_set, num_workers=4)

        def evaluate(name):
            return list(DataLoader(ood_sets[name], num_workers=2))

        for batch in train:
            pass
        for name in ood_sets:
            evaluate(name)
        for batch in test:
            pass
        """
    [found] = lint_findings(source, "TD405")
    assert found.location.line == 4
    assert "(so do the loaders at lines 5, 8)" in found.message
    assert found.evidence["other_loader_lines"] == [5, 8]


_LOADER_HELPERS = """
from torch.utils.data import DataLoader


def get_loader(folder, batch_size, workers):
    return DataLoader(folder, batch_size=batch_size, shuffle=True, num_workers={workers})


def get_all_data_loaders(conf):
    train_a = get_loader(conf["a"], conf["batch_size"], conf["workers"])
    train_b = get_loader(conf["b"], conf["batch_size"], conf["workers"])
    return train_a, train_b
"""
_SCRIPT = """
import torch
from utils import get_all_data_loaders

config = {{"a": [], "b": [], "batch_size": 8, "workers": 4}}
train_loader_a, train_loader_b = get_all_data_loaders(config)
{run}
"""


@pytest.mark.parametrize(
    ("workers", "run", "flagged"),
    [
        # DG-Net's train.py: loaders from utils, iterated by module-level code
        ("workers", "for a, b in zip(train_loader_a, train_loader_b):\n    print(a, b)", True),
        ("0", "for a, b in zip(train_loader_a, train_loader_b):\n    print(a, b)", False),
        ("workers", "print(len(train_loader_a))\n", True),  # read: may be iterated anywhere
        ("workers", "", False),  # built, never used while importing
        (
            "workers",
            "def main():\n    for a in train_loader_a:\n        print(a)\n"
            "if __name__ == '__main__':\n    main()",
            False,
        ),
    ],
)
def test_td405_loaders_a_helper_of_another_module_builds(
    tmp_path, workers: str, run: str, flagged: bool
) -> None:
    from torchdoctor.static import LintConfig, lint

    (tmp_path / "utils.py").write_text(_LOADER_HELPERS.format(workers=workers), "utf-8")
    (tmp_path / "train.py").write_text(_SCRIPT.format(run=run), encoding="utf-8")
    found = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD405")
    assert [(f.location.path.rpartition("/")[2], f.location.line) for f in found] == (
        [("train.py", 6)] if flagged else []
    )
    if flagged:
        assert "utils.py:6)" in found[0].message


def test_guarded_scripts_stay_quiet() -> None:
    for guard in (
        'if __name__ == "__main__":',
        "if '__main__' == __name__:",
        'if __name__ == "__main__" and not DEBUG:',
    ):
        source = f"""
from torch.utils.data import DataLoader

def main():
    for x in DataLoader(dataset, num_workers=8):
        pass

{guard}
    main()
"""
        assert lint_codes(source, "TD405") == [], guard


def test_loaders_without_workers_or_with_fork_stay_quiet() -> None:
    source = """
        from torch.utils.data import DataLoader

        a = DataLoader(dataset, batch_size=4)
        b = DataLoader(dataset, num_workers=0)
        c = DataLoader(dataset, num_workers=4, multiprocessing_context="fork")
        for batch in a, b, c:
            pass
        """
    assert lint_codes(source, "TD405") == []


def test_library_modules_stay_quiet() -> None:
    source = """
        from torch.utils.data import DataLoader

        def make_loader(dataset):
            return DataLoader(dataset, num_workers=4)

        class DataModule:
            def train_dataloader(self):
                return DataLoader(self.train_set, num_workers=4)

        default_loader = DataLoader(DATASET, num_workers=4)  # built, never iterated here
        """
    assert lint_codes(source, "TD405") == []


# --- TD406 dataloader-created-in-loop --------------------------------------------------------


def test_loader_rebuilt_every_epoch_is_flagged() -> None:
    source = """
        from torch.utils.data import DataLoader

        def train(model, train_set, epochs):
            for epoch in range(epochs):
                loader = DataLoader(train_set, batch_size=32, shuffle=True, num_workers=4,
                                    persistent_workers=True)
                for x, y in loader:
                    model(x)
        """
    [found] = lint_findings(source, "TD406")
    assert found.location.line == 6
    assert "loop at line 5" in found.message
    assert "persistent_workers=True" in found.message


def test_loader_read_whole_per_pass_without_persistent_workers_is_information() -> None:
    # Round 5's voice-cloning vocoder: a loader without persistent workers restarts them
    # at each new pass anyway, so one rebuilt per pass and read whole costs nothing more.
    source = """
        import torch

        def train(model, train_set, epochs, cfg):
            for epoch in range(epochs):
                for x, y in torch.utils.data.DataLoader(train_set, num_workers=cfg.workers):
                    model(x)
            while True:
                loader = torch.utils.data.DataLoader(train_set, num_workers=2)
                run_epoch(model, loader)
            for epoch in range(epochs):
                loader = torch.utils.data.DataLoader(train_set, num_workers=2)
                for step, (x, y) in enumerate(tqdm(loader)):
                    model(x)
        """
    found = lint_findings(source, "TD406")
    assert [(f.location.line, f.severity) for f in found] == [
        (6, Severity.INFO),
        (9, Severity.INFO),
        (12, Severity.INFO),
    ]
    assert "persistent_workers=True" in found[0].fix_hint


def test_loader_rebuilt_to_read_a_few_batches_is_flagged() -> None:
    source = """
        from torch.utils.data import DataLoader

        def train(model, train_set, steps):
            for step in range(steps):
                loader = DataLoader(train_set, batch_size=8, shuffle=True, num_workers=4)
                model(next(iter(loader)))
        """
    found = lint_findings(source, "TD406")
    assert [(f.location.line, f.severity) for f in found] == [(6, Severity.WARNING)]


def test_loader_built_once_stays_quiet() -> None:
    source = """
        from torch.utils.data import DataLoader

        def train(model, train_set, epochs):
            loader = DataLoader(train_set, batch_size=32, shuffle=True, num_workers=4)
            for epoch in range(epochs):
                for x, y in loader:
                    model(x)
        """
    assert lint_codes(source, "TD406") == []


def test_loaders_that_change_per_pass_or_have_no_workers_stay_quiet() -> None:
    source = """
        from torch.utils.data import DataLoader, Subset

        def cross_validate(model, dataset, folds, epochs):
            for fold, indices in enumerate(folds):
                loader = DataLoader(Subset(dataset, indices), num_workers=4)
                for x in loader:
                    model(x)
            for epoch in range(epochs):
                cheap = DataLoader(dataset, batch_size=8)
                for x in cheap:
                    model(x)
                sized = DataLoader(dataset, batch_size=8 * (epoch + 1), num_workers=4)
                for x in sized:
                    model(x)
                subset = DataLoader(random_subset(dataset), num_workers=4)
                for x in subset:
                    model(x)
        """
    assert lint_codes(source, "TD406") == []


def test_loaders_built_in_a_loop_but_not_iterated_there_stay_quiet() -> None:
    source = """
        from torch.utils.data import DataLoader

        def build(datasets):
            loaders = []
            for name in ("train", "val"):
                loaders.append(DataLoader(datasets[name], num_workers=4))
            return loaders
        """
    assert lint_codes(source, "TD406") == []


# --- TD407 train-loader-not-shuffled ---------------------------------------------------------


def test_training_loader_named_train_without_shuffle_is_flagged_with_a_fix() -> None:
    source = """
        from torch.utils.data import DataLoader

        train_loader = DataLoader(train_set, batch_size=64)
        """
    [found] = lint_findings(source, "TD407")
    assert found.location.line == 4 and found.confidence is Confidence.HIGH
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    assert "DataLoader(train_set, batch_size=64, shuffle=True)" in applied(source, found.fix)


def test_neutral_loader_feeding_a_backward_loop_with_shuffle_false_is_flagged() -> None:
    source = """
        from torch.utils.data import DataLoader

        def fit(model, dataset, optimizer):
            loader = DataLoader(dataset, 16, False)
            for x, y in loader:
                model(x).sum().backward()
                optimizer.step()
        """
    [found] = lint_findings(source, "TD407")
    assert found.location.line == 5 and found.confidence is Confidence.MEDIUM
    assert found.fix is not None
    assert "DataLoader(dataset, 16, True)" in applied(source, found.fix)


def test_evaluation_loaders_stay_quiet() -> None:
    source = """
        from torch.utils.data import DataLoader

        val_loader = DataLoader(val_set, batch_size=64)
        test_dl = DataLoader(test_set, batch_size=64, shuffle=False)
        loader = DataLoader(validation_data, batch_size=64)

        def evaluate(model, dataset):
            for x, y in DataLoader(dataset, batch_size=64):
                model(x)
        """
    assert lint_codes(source, "TD407") == []


def test_training_loaders_that_shuffle_some_other_way_stay_quiet() -> None:
    source = """
        from torch.utils.data import DataLoader, DistributedSampler, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                yield from range(10)

        train_a = DataLoader(train_set, batch_size=64, shuffle=True)
        train_b = DataLoader(train_set, sampler=DistributedSampler(train_set))
        train_c = DataLoader(train_set, shuffle=args.shuffle)
        train_d = DataLoader(Stream(), batch_size=8)
        train_e = DataLoader(train_set, batch_sampler=bucket_sampler)
        """
    assert lint_codes(source, "TD407") == []


def test_a_sampler_that_is_none_on_one_path_leaves_that_path_unshuffled() -> None:
    """`sampler=DistributedSampler(ds) if distributed else None` with `shuffle=False`:
    single-process training never shuffles; the finding names the path."""
    source = """
        from torch.utils.data import DataLoader, DistributedSampler

        def build(train_set, num_gpus):
            train_sampler = DistributedSampler(train_set) if num_gpus > 1 else None
            train_loader = DataLoader(train_set, shuffle=False, sampler=train_sampler)
            return train_loader

        def make_loader(dataset, train, distributed):
            sampler = DistributedSampler(dataset) if distributed else None
            return DataLoader(dataset, shuffle=False, sampler=sampler if train else None)

        def quiet(dataset, train, distributed):
            sampler = DistributedSampler(dataset) if distributed else None
            a = DataLoader(dataset, shuffle=(sampler is None), sampler=sampler)
            b = DataLoader(
                dataset, shuffle=False,
                sampler=DistributedSampler(dataset) if distributed else RandomSampler(dataset),
            )
            val_loader = DataLoader(dataset, sampler=sampler if not train else None)
        """
    found = {f.location.line: f.message for f in lint_findings(source, "TD407")}
    assert sorted(found) == [6, 11]
    assert "no sampler when `num_gpus > 1` is false" in found[6]
    assert "no sampler when `train` is true and `distributed` is false" in found[11]


def test_shuffle_that_may_arrive_through_a_kwargs_dict_stays_quiet() -> None:
    # The options dict is built elsewhere (updated with shuffle=True, or a sampler).
    source = """
        import torch
        from torch.utils.data import DataLoader

        def main(args, train_set, test_set, options):
            train_kwargs = {"batch_size": args.batch_size}
            if args.cuda:
                train_kwargs.update({"num_workers": 1, "shuffle": True})
            train_loader = torch.utils.data.DataLoader(train_set, **train_kwargs)
            other_train_loader = DataLoader(train_set, *options)
            return train_loader, other_train_loader
        """
    assert lint_codes(source, "TD407") == []


def test_random_and_stream_datasets_have_no_order_to_shuffle() -> None:
    source = """
        from torch.utils.data import DataLoader

        train_loader = DataLoader(RandomTokenDataset(1000, 128), batch_size=8)
        train_data = DataLoader(SyntheticImages(64), batch_size=8)
        train_dataloader = DataLoader(train_iterator, batch_size=8)
        """
    assert lint_codes(source, "TD407") == []


def test_severity_follows_what_the_code_shows_about_the_order() -> None:
    source = """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        from torchvision import datasets

        def sorted_split(n):
            labels = torch.randint(0, 4, (n,)).sort().values
            return TensorDataset(torch.randn(n, 8), labels)

        folder = datasets.ImageFolder("data/train")
        train_a = DataLoader(folder, batch_size=64)
        train_b = DataLoader(sorted_split(256), batch_size=64)
        train_c = DataLoader(train_set, batch_size=64)
        """
    found = lint_findings(source, "TD407")
    assert [(f.location.line, f.severity) for f in found] == [
        (11, Severity.WARNING),
        (12, Severity.WARNING),
        (13, Severity.INFO),
    ]
    assert "stored sorted" in found[0].message


def test_a_class_ordered_folder_whose_labels_are_thrown_away_is_information() -> None:
    source = """
        from torch.utils.data import DataLoader
        from torchvision import datasets

        def train(model, optimizer, root):
            train_loader = DataLoader(datasets.ImageFolder(root), batch_size=4)
            for epoch in range(2):
                for batch_id, (x, _) in enumerate(train_loader):
                    optimizer.zero_grad()
                    model(x).mean().backward()
                    optimizer.step()
        """
    [found] = lint_findings(source, "TD407")
    assert found.severity is Severity.INFO


# One pass over data that the program permuted itself (the TD612 lab's fixed.py).
PERMUTED_ONCE = """
    import torch

    def main(model, optimizer, features, labels):
        order = torch.randperm(len(features))
        features, labels = features[order], labels[order]
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(features, labels), batch_size=32)
        for step, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    """


def test_one_pass_over_data_permuted_by_hand_stays_quiet() -> None:
    assert lint_codes(PERMUTED_ONCE, "TD407") == []
    inline = PERMUTED_ONCE.replace(
        "features[order], labels[order]", "features[torch.randperm(8)], labels[np_perm]"
    ).replace("order = torch.randperm(len(features))", "np_perm = rng.permutation(8)")
    assert lint_codes(inline, "TD407") == []


def test_permuted_data_read_again_every_epoch_is_flagged() -> None:
    source = (
        PERMUTED_ONCE.replace(
            "        for step, (x, y) in enumerate(loader):",
            "        for epoch in range(10):\n            for step, (x, y) in enumerate(loader):",
        )
        .replace("            optimizer.", "                optimizer.")
        .replace("            model(x)", "                model(x)")
    )
    assert lint_codes(source, "TD407") == [("TD407", 7)]


def test_inputs_permuted_without_their_labels_are_still_flagged() -> None:
    source = PERMUTED_ONCE.replace(
        "features, labels = features[order], labels[order]", "features = features[order]"
    )
    assert lint_codes(source, "TD407") == [("TD407", 7)]


def test_neutral_loaders_that_never_feed_a_backward_stay_quiet() -> None:
    source = """
        import torch
        from torch.utils.data import DataLoader

        @torch.no_grad()
        def embed(model, dataset):
            loader = DataLoader(dataset, batch_size=256)
            return [model(x) for x in loader]

        def export(model, dataset, writer):
            loader = DataLoader(dataset, batch_size=256)
            for x in loader:
                writer.write(model(x))
        """
    assert lint_codes(source, "TD407") == []


# --- TD408 non-blocking-without-pin-memory ---------------------------------------------------


def test_non_blocking_copies_from_an_unpinned_loader_are_flagged() -> None:
    source = """
        from torch.utils.data import DataLoader

        def train(model, dataset, device):
            loader = DataLoader(dataset, batch_size=32, shuffle=True, pin_memory=False)
            for step, batch in enumerate(loader):
                x, y = batch
                x = x.cuda(non_blocking=True)
                y = y.to(device, non_blocking=True)
                extra = {k: v.to(device, non_blocking=True) for k, v in batch[2].items()}
        """
    found = lint_findings(source, "TD408")
    assert [f.location.line for f in found] == [8, 9, 10]
    assert all(f.fix is not None for f in found)
    assert "pin_memory=True)" in applied(source, found[0].fix)
    assert "DataLoader at line 5" in found[0].message


def test_the_fix_adds_pin_memory_when_it_is_absent() -> None:
    source = """
        import torch

        class Trainer:
            def __init__(self, dataset):
                self.loader = torch.utils.data.DataLoader(dataset, batch_size=8)

            def run(self, device):
                for x in self.loader:
                    x.to(device, non_blocking=True)
        """
    [found] = lint_findings(source, "TD408")
    assert found.fix is not None
    assert "DataLoader(dataset, batch_size=8, pin_memory=True)" in applied(source, found.fix)


def test_pinned_or_unknown_loaders_stay_quiet() -> None:
    source = """
        from torch.utils.data import DataLoader

        def train(model, dataset, device, loader, args):
            pinned = DataLoader(dataset, pin_memory=True)
            for x in pinned:
                x.to(device, non_blocking=True)
            maybe = DataLoader(dataset, pin_memory=args.pin)
            for x in maybe:
                x.to(device, non_blocking=True)
            for x in loader:
                x.to(device, non_blocking=True)
        """
    assert lint_codes(source, "TD408") == []


def test_blocking_copies_and_hand_pinned_or_unrelated_tensors_stay_quiet() -> None:
    source = """
        from torch.utils.data import DataLoader

        def train(model, dataset, device):
            loader = DataLoader(dataset)
            for x, y in loader:
                x = x.to(device)
                y = y.pin_memory().to(device, non_blocking=True)
                model.to(device, non_blocking=True)
        """
    assert lint_codes(source, "TD408") == []


@pytest.mark.parametrize(
    ("calls", "flagged"),
    [
        # scGPT: the parameter defaults to 0 and no call passes it
        ("prepare(data, 32)\nprepare(data, 64, shuffle=True)", False),
        ("prepare(data, 32, num_workers=0)", False),
        # one call asks for workers, or passes a value known only at run time
        ("prepare(data, 32)\nprepare(data, 64, num_workers=4)", True),
        ("prepare(data, 32, num_workers=args.workers)", True),
        ("prepare(data, 32, **options)", True),
    ],
)
def test_td405_workers_a_parameter_gets_from_the_files_calls(calls: str, flagged: bool) -> None:
    source = f"""
import torch

def prepare(data, batch_size, shuffle=False, num_workers=0):
    return torch.utils.data.DataLoader(data, batch_size, shuffle, num_workers=num_workers)

{calls}
"""
    assert bool(lint_findings(source, "TD405")) is flagged


@pytest.mark.parametrize(
    ("workers", "flagged"),
    [
        # braindecode: the test compares numbers the file fixes, so the branch is known
        ("n_jobs = 1\nnum_workers = 0 if n_jobs <= 1 else n_jobs", False),
        ("n_jobs = 4\nnum_workers = n_jobs if n_jobs > 8 else 0", False),
        ("num_workers = 0 if False else 2", True),  # not a comparison: the larger branch
        ("n_jobs = 4\nnum_workers = 0 if n_jobs <= 1 else n_jobs", True),
        ("import os\nnum_workers = 0 if os.cpu_count() <= 1 else 4", True),  # run time
        ("num_workers = 0 if int(input()) else 0", False),  # both branches 0
    ],
)
def test_td405_a_conditional_worker_count_is_read_where_the_file_fixes_it(
    workers: str, flagged: bool
) -> None:
    source = f"""
import torch

{workers}
dataset = torch.utils.data.TensorDataset(torch.randn(8, 2))
loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=num_workers)
for (x,) in loader:
    print(x.sum())
"""
    assert bool(lint_findings(source, "TD405")) is flagged
