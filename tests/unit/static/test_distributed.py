"""TD801 sampler-epoch-never-set, TD802 shuffle-with-sampler, TD803
find-unused-parameters-cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings
from torchdoctor.findings import Applicability, Confidence, Severity
from torchdoctor.static import LintConfig, lint

# --- TD801 ------------------------------------------------------------------------------

EPOCHS = """
import torch
from torch.utils.data import DataLoader, DistributedSampler

def main(dataset, model, optimizer):
    sampler = DistributedSampler(dataset{sampler_args})
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    for epoch in range(10):
{epoch_body}
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
"""


def td801(sampler_args: str = "", epoch_body: str = "        pass") -> list[tuple[str, int]]:
    return lint_codes(
        EPOCHS.format(sampler_args=sampler_args, epoch_body=epoch_body), "TD801", "TD001"
    )


def test_sampler_without_set_epoch_is_flagged_at_its_construction() -> None:
    assert td801() == [("TD801", 6)]


def test_the_message_names_the_epoch_loop_and_the_fix_inserts_set_epoch() -> None:
    (found,) = lint_findings(EPOCHS.format(sampler_args="", epoch_body="        pass"), "TD801")
    assert found.severity is Severity.ERROR and "epoch loop at line 8" in found.message
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    (edit,) = found.fix.edits
    assert edit.start_line == 9 and edit.replacement.startswith("sampler.set_epoch(epoch)\n")


def test_a_sampler_built_inline_and_a_helper_epoch_are_followed() -> None:
    source = """
    from torch.utils import data
    def train_one_epoch(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    def main():
        loader = data.DataLoader(ds, sampler=data.distributed.DistributedSampler(ds))
        for epoch in range(3):
            train_one_epoch(model, loader, optimizer)
    """
    (found,) = lint_findings(source, "TD801")
    assert found.location.line == 9 and "`loader.sampler.set_epoch(epoch)`" in found.fix_hint


def test_a_loader_factory_with_no_set_epoch_anywhere_is_flagged_with_medium_confidence() -> None:
    source = """
    import torch
    from torch.utils.data import DataLoader, DistributedSampler
    def prepare_dataloader(dataset):
        return DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset))
    class Trainer:
        def __init__(self, data):
            self.data = data
        def _run_epoch(self):
            for x in self.data:
                self.optimizer.zero_grad()
                self.model(x).backward()
                self.optimizer.step()
        def train(self, epochs):
            for epoch in range(epochs):
                self._run_epoch()
    Trainer(prepare_dataloader(ds)).train(3)
    """
    (found,) = lint_findings(source, "TD801")
    assert (found.location.line, found.confidence) == (5, Confidence.MEDIUM)
    assert found.fix is None


def test_set_epoch_in_the_epoch_loop_is_quiet() -> None:
    assert td801(epoch_body="        sampler.set_epoch(epoch)") == []
    assert td801(epoch_body="        loader.sampler.set_epoch(epoch)") == []


def test_set_epoch_in_a_helper_called_each_epoch_is_quiet() -> None:
    source = (
        EPOCHS.format(sampler_args="", epoch_body="        prepare(loader, epoch)")
        + """
def prepare(loader, epoch):
    loader.sampler.set_epoch(epoch)
"""
    )
    assert lint_codes(source, "TD801", "TD001") == []


def test_a_sampler_that_does_not_shuffle_is_quiet() -> None:
    assert td801(sampler_args=", shuffle=False") == []


def test_a_single_pass_over_the_data_is_quiet() -> None:
    source = """
    from torch.utils.data import DataLoader, DistributedSampler
    sampler = DistributedSampler(dataset)
    for x, y in DataLoader(dataset, sampler=sampler):
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
    """
    assert lint_codes(source, "TD801", "TD001") == []


def test_a_sampler_the_epoch_loop_never_uses_is_quiet() -> None:
    source = """
    from torch.utils.data import DistributedSampler
    def test_sizes(dataset):
        sampler = DistributedSampler(dataset, drop_last=True)
        assert sampler.num_samples == 4
    def train(loader):
        for epoch in range(3):
            for x in loader:
                optimizer.zero_grad()
                model(x).backward()
                optimizer.step()
    """
    assert lint_codes(source, "TD801", "TD001") == []


def test_a_sampler_handed_with_its_loader_to_an_unseen_helper_is_quiet() -> None:
    """trlX: ``infinite_dataloader(make_loader(..., sampler=s), sampler=s)``, imported
    from another module, sets the epoch on every pass over the loader. A function of this
    file given both is read instead: it never calls set_epoch, so the sampler is flagged."""
    source = """
import torch
from torch.utils.data import DataLoader, DistributedSampler
from mylib.utils import infinite_dataloader

def unseen(dataset, model, optimizer):
    sampler = DistributedSampler(dataset, shuffle=True)
    batches = infinite_dataloader(DataLoader(dataset, sampler=sampler), sampler=sampler)
    for epoch in range(10):
        for step in range(100):
            x, y = next(batches)
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()

def run_epoch(loader, sampler, model, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()

def main(dataset, model, optimizer):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, sampler=sampler)
    for epoch in range(10):
        run_epoch(loader, sampler, model, optimizer)
"""
    assert lint_codes(source, "TD801") == [("TD801", 23)]


def test_set_epoch_called_once_before_the_loop_is_not_enough() -> None:
    source = EPOCHS.replace(
        "    for epoch in range(10):", "    sampler.set_epoch(0)\n    for epoch in range(10):"
    )
    assert lint_codes(
        source.format(sampler_args="", epoch_body="        pass"), "TD801", "TD001"
    ) == [("TD801", 6)]


TRAINER = """
import torch
from torch.utils.data import DataLoader, DistributedSampler

class Trainer:
    def __init__(self, dataset, model, optimizer):
        self.model, self.optimizer = model, optimizer
{build}
    def _run_epoch(self, epoch):
        for x, y in self.train_loader:
            self.optimizer.zero_grad()
            self.model(x).sum().backward()
            self.optimizer.step()

    def fit(self, epochs):
        for epoch in range(epochs):
{epoch_body}
            self._run_epoch(epoch)
"""
ON_SELF = """\
        sampler = DistributedSampler(dataset)
        self.train_loader = DataLoader(dataset, batch_size=32, sampler=sampler)
"""


def trainer(build: str = ON_SELF, epoch_body: str = "            pass") -> list[tuple[str, int]]:
    return lint_codes(TRAINER.format(build=build, epoch_body=epoch_body), "TD801", "TD001")


def test_a_trainer_loader_iterated_by_a_method_the_epoch_loop_calls_is_flagged() -> None:
    assert trainer() == [("TD801", 8)]
    (found,) = lint_findings(TRAINER.format(build=ON_SELF, epoch_body="            pass"), "TD801")
    assert "epoch loop at line 18" in found.message and found.confidence is Confidence.HIGH
    assert "`self.train_loader.sampler.set_epoch(epoch)`" in found.fix_hint
    assert found.fix is None  # the epoch loop is in another method than the sampler


def test_a_sampler_kept_on_self_is_followed_into_a_helper_of_a_helper() -> None:
    source = """
    from torch.utils.data import DataLoader, DistributedSampler
    class Trainer:
        def setup(self, dataset):
            self.sampler = DistributedSampler(dataset, shuffle=True)
            self.loader = DataLoader(dataset, sampler=self.sampler)
        def _steps(self):
            for x in self.loader:
                self.opt.zero_grad()
                self.model(x).backward()
                self.opt.step()
        def _epoch(self):
            self._steps()
        def train(self, epochs):
            for epoch in range(epochs):
                self._epoch()
    """
    (found,) = lint_findings(source, "TD801")
    assert found.location.line == 5 and "`self.sampler.set_epoch(epoch)`" in found.fix_hint


def test_set_epoch_through_the_stored_loader_or_a_method_is_quiet() -> None:
    assert trainer(epoch_body="            self.train_loader.sampler.set_epoch(epoch)") == []
    source = TRAINER.format(build=ON_SELF, epoch_body="            self._begin(epoch)")
    source += """
    def _begin(self, epoch):
        self.train_loader.sampler.set_epoch(epoch)
"""
    assert lint_codes(source, "TD801", "TD001") == []


def test_an_epoch_loop_that_hands_the_trainer_to_unseen_callbacks_is_quiet() -> None:
    body = (
        "            for callback in self.callbacks:\n"
        "                callback.on_epoch_start(self, epoch)"
    )
    assert trainer(epoch_body=body) == []


def test_a_loader_only_evaluated_by_the_called_method_is_quiet() -> None:
    source = """
    import torch
    from torch.utils.data import DataLoader, DistributedSampler
    class Trainer:
        def __init__(self, dataset, val_set):
            self.train_loader = DataLoader(dataset, batch_size=32)
            self.val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set))
        def _train(self):
            for x in self.train_loader:
                self.optimizer.zero_grad()
                self.model(x).backward()
                self.optimizer.step()
        @torch.no_grad()
        def _validate(self):
            total = 0.0
            for x in self.val_loader:
                total += self.model(x).sum()
            return total
        def fit(self, epochs):
            for epoch in range(epochs):
                self._train()
                self._validate()
    """
    assert lint_codes(source, "TD801", "TD001") == []


# Round 39's DeepSpeed-Chat: train and evaluation samplers built side by side; the epoch
# loop hands the evaluation loader to a nested evaluation() that takes no step.
EVAL_AND_TRAIN = """
import torch
from torch.utils.data import DataLoader, DistributedSampler

def main(train_set, eval_set, model, optimizer, epochs):
    train_sampler = DistributedSampler(train_set)
    eval_sampler = DistributedSampler(eval_set)
    train_loader = DataLoader(train_set, sampler=train_sampler)
    eval_loader = DataLoader(eval_set, sampler=eval_sampler)

    def evaluation(model, loader):
        model.eval()
        total = 0.0
        for step, batch in enumerate(loader):
            with torch.no_grad():
                total += model(batch).sum()
        return total / (step + 1)

    for epoch in range(epochs):
        model.train()
        for batch in train_loader:
            optimizer.zero_grad()
            model(batch).sum().backward()
            optimizer.step()
        print(len(eval_loader), evaluation(model, eval_loader))
"""


def test_a_sampler_whose_loader_the_epoch_loop_only_evaluates_is_quiet() -> None:
    # Only the training sampler (line 6) is reported; the evaluation one (line 7) is not.
    assert lint_codes(EVAL_AND_TRAIN, "TD801", "TD001") == [("TD801", 6)]
    # Handed to a function lint cannot read, the loader may be trained on.
    unseen = EVAL_AND_TRAIN.replace("evaluation(model, eval_loader))", "score(eval_loader))")
    assert lint_codes(unseen, "TD801", "TD001") == [("TD801", 6), ("TD801", 7)]
    # An evaluation loop in the epoch loop itself is no training either.
    inline = EVAL_AND_TRAIN.replace(
        "        print(len(eval_loader), evaluation(model, eval_loader))",
        "        with torch.no_grad():\n            for batch in eval_loader:\n"
        "                model(batch)",
    )
    assert lint_codes(inline, "TD801", "TD001") == [("TD801", 6)]
    # A loader that the epoch loop also trains on keeps its finding.
    both = inline.replace(
        "                model(batch)",
        "                model(batch).sum().backward()\n                optimizer.step()",
    )
    assert lint_codes(both, "TD801", "TD001") == [("TD801", 6), ("TD801", 7)]


# Round 78's pythae: a trainer builds each loader in a factory method of its own, with a
# DistributedSampler inside; the epoch loop reaches the loaders through the attributes the
# factories' results are kept in, hands both to hooks it cannot see, and iterates the
# second one only in a method that takes no step.
TWO_FACTORIES = """
import torch
from torch.utils.data import DataLoader, DistributedSampler

class Runner:
    def __init__(self, first_set, second_set, hooks):
        self.hooks = hooks
        first = self.first_loader(first_set)
        second = self.second_loader(second_set)
        self.first = first
        self.second = second

    def first_loader(self, dataset):
        if self.distributed:
            sampler = DistributedSampler(dataset, num_replicas=self.world)  # expect: TD801
        else:
            sampler = None
        return DataLoader(dataset, batch_size=8, shuffle=(sampler is None), sampler=sampler)

    def second_loader(self, dataset):
        if self.distributed:
            sampler = DistributedSampler(dataset, rank=self.rank){mark}
        else:
            sampler = None
        return DataLoader(dataset, batch_size=8, sampler=sampler)

    def _step(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def first_pass(self):
        for x in self.first:
            self._step(self.model(x).sum())

    def second_pass(self):
        total = 0.0
        for x in self.second:
            with torch.no_grad():
                total += self.model(x).sum().item()
        return total / len(self.second)

    def run(self, epochs):
        for epoch in range(epochs):
            self.hooks.on_epoch_begin(first=self.first, second=self.second)
            self.first_pass()
            self.second_pass()
"""


def test_a_factory_loader_that_the_file_iterates_only_to_evaluate_is_quiet() -> None:
    assert_marked(TWO_FACTORIES.format(mark=""), "TD801")


def test_a_factory_loader_that_the_file_also_trains_on_is_flagged() -> None:
    trained = TWO_FACTORIES.format(mark="  # expect: TD801").replace(
        "                total += self.model(x).sum().item()",
        "                total += self.model(x).sum().item()\n"
        "            self._step(self.model(x).sum())",
    )
    assert_marked(trained, "TD801")
    # Names that say evaluation silence nothing: the loops over the loader decide.
    assert_marked(trained.replace("second", "eval"), "TD801")
    # Never iterated by the file, only handed to code it cannot read: it may be trained on.
    unseen = TWO_FACTORIES.format(mark="  # expect: TD801").replace(
        "        for x in self.second:", "        for x in self.hooks.batches():"
    )
    assert_marked(unseen, "TD801")
    # Drawn from inside a loop that trains, through next(iter(...)).
    drawn = TWO_FACTORIES.format(mark="  # expect: TD801").replace(
        "            self._step(self.model(x).sum())",
        "            self._step(self.model(x).sum() + self.model(next(iter(self.second))).sum())",
    )
    assert_marked(drawn, "TD801")


def test_a_same_named_attribute_of_another_class_is_not_the_sampler_loader() -> None:
    source = """
    from torch.utils.data import DataLoader, DistributedSampler
    class Data:
        def __init__(self, dataset):
            self.loader = DataLoader(dataset, sampler=DistributedSampler(dataset))
    class Trainer:
        def __init__(self, loader):
            self.loader = loader
        def _run_epoch(self):
            for x in self.loader:
                self.opt.zero_grad()
                self.model(x).backward()
                self.opt.step()
        def fit(self, epochs):
            for epoch in range(epochs):
                self._run_epoch()
    """
    assert lint_codes(source, "TD801", "TD001") == []


MODULE_LOADER = """
from torch.utils.data import DataLoader, DistributedSampler
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, sampler=sampler)

def train_one_epoch():
{helper}
    for x in loader:
        optimizer.zero_grad()
        model(x).backward()
        optimizer.step()

def main():
    for epoch in range(3):
        train_one_epoch()
"""


def test_a_module_loader_iterated_by_a_global_helper_is_flagged() -> None:
    assert lint_codes(MODULE_LOADER.format(helper="    pass"), "TD801", "TD001") == [("TD801", 3)]


def test_a_helper_that_iterates_its_own_loader_of_the_same_name_is_quiet() -> None:
    source = MODULE_LOADER.format(helper="    loader = make_loader()")
    assert lint_codes(source, "TD801", "TD001") == []


# --- TD802 ------------------------------------------------------------------------------


def td802(source: str) -> list[tuple[str, int]]:
    return lint_codes(source, "TD802", "TD001")


def test_shuffle_with_a_sampler_is_flagged() -> None:
    source = """
    from torch.utils.data import DataLoader as DL, DistributedSampler
    sampler = DistributedSampler(dataset)
    loader = DL(dataset, batch_size=8, shuffle=True, sampler=sampler)
    batches = DL(dataset, shuffle=True, batch_sampler=make_batches())
    """
    assert td802(source) == [("TD802", 4), ("TD802", 5)]


def test_a_conditional_sampler_is_flagged_with_a_safe_fix() -> None:
    source = """
    import torch
    sampler = torch.utils.data.DistributedSampler(ds) if distributed else None
    loader = torch.utils.data.DataLoader(ds, shuffle=True, sampler=sampler)
    """
    (found,) = lint_findings(source, "TD802")
    assert "mutually exclusive" in found.message
    assert found.fix is not None and found.fix.applicability is Applicability.SAFE
    assert found.fix.edits[0].replacement == "(sampler is None)"


def test_a_sampler_parameter_defaulting_to_none_has_medium_confidence() -> None:
    source = """
    from torch.utils.data import DataLoader
    def make_loader(dataset, sampler=None):
        return DataLoader(dataset, shuffle=True, sampler=sampler)
    """
    (found,) = lint_findings(source, "TD802")
    assert found.confidence is Confidence.MEDIUM


def test_positional_shuffle_and_sampler_are_read() -> None:
    source = """
    from torch.utils.data import DataLoader
    loader = DataLoader(dataset, 32, True, my_sampler)
    """
    assert td802(source) == [("TD802", 3)]


def test_a_helper_that_returns_a_loader_keeps_its_own_positions() -> None:
    """``get_loader(root, captions, vocab, transform, shuffle=True)`` returns a DataLoader,
    but its fourth argument is its own (a transform), not DataLoader's ``sampler``. Keywords
    named like DataLoader's still say what they are; a subclass keeps the positions."""
    source = """
    import torch
    from torch.utils.data import DataLoader

    def get_loader(root, captions, vocab, transform, batch_size, shuffle, workers):
        coco = Coco(root, captions, vocab, transform)
        return DataLoader(coco, batch_size=batch_size, shuffle=shuffle)

    class BucketLoader(DataLoader):
        pass

    quiet = get_loader(root, captions, vocab, transform, 32, shuffle=True, workers=4)
    named = get_loader(root, captions, vocab, 32, shuffle=True, sampler=my_sampler)
    subclass = BucketLoader(dataset, 32, True, my_sampler)
    """
    assert td802(source) == [("TD802", 13), ("TD802", 14)]


def test_shuffle_decided_by_the_sampler_is_quiet() -> None:
    source = """
    from torch.utils.data import DataLoader, DistributedSampler
    sampler = DistributedSampler(ds) if distributed else None
    a = DataLoader(ds, shuffle=(sampler is None), sampler=sampler)
    b = DataLoader(ds, shuffle=False, sampler=sampler)
    c = DataLoader(ds, shuffle=args.shuffle, sampler=sampler)
    d = DataLoader(ds, shuffle=True)
    """
    assert td802(source) == []


def test_a_sampler_that_is_always_none_is_quiet() -> None:
    source = """
    from torch.utils.data import DataLoader
    sampler = None
    a = DataLoader(ds, shuffle=True, sampler=sampler)
    b = DataLoader(ds, shuffle=True, sampler=None, batch_sampler=None)
    """
    assert td802(source) == []


def test_options_lint_cannot_see_and_other_sampler_arguments_are_quiet() -> None:
    source = """
    from torch.utils.data import DataLoader
    a = DataLoader(ds, shuffle=True, **loader_options)
    b = DataLoader(ds, batch_size=8, drop_last=True, sampler=sampler)
    c = DataLoader(ds, sampler=sampler, shuffle=False, batch_sampler=None)
    """
    assert td802(source) == []


def test_other_callables_with_the_same_keywords_are_quiet() -> None:
    source = """
    from mylib import Loader
    a = Loader(ds, shuffle=True, sampler=sampler)
    b = build(shuffle=True, sampler=sampler)
    """
    assert td802(source) == []


# --- TD803 ------------------------------------------------------------------------------


def td803(source: str) -> list[tuple[str, int]]:
    return lint_codes(source, "TD803", "TD001")


def test_find_unused_parameters_is_reported_as_info() -> None:
    source = """
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(net, device_ids=[rank],
                find_unused_parameters=True)
    """
    (found,) = lint_findings(source, "TD803")
    assert (found.location.line, found.severity) == (4, Severity.INFO)
    assert "static_graph=True" in found.fix_hint


def test_lightning_spellings_are_recognised() -> None:
    source = """
    import lightning as L
    from lightning.pytorch.strategies import DDPStrategy
    trainer = L.Trainer(strategy=DDPStrategy(find_unused_parameters=True))
    trainer = L.Trainer(strategy="ddp_find_unused_parameters_true")
    """
    assert td803(source) == [("TD803", 4), ("TD803", 5)]


def test_the_default_and_explicit_false_are_quiet() -> None:
    source = """
    import torch
    a = torch.nn.parallel.DistributedDataParallel(net)
    b = torch.nn.parallel.DistributedDataParallel(net, find_unused_parameters=False)
    c = torch.nn.parallel.DistributedDataParallel(net, find_unused_parameters=args.unused)
    """
    assert td803(source) == []


def test_helpers_that_only_take_the_flag_are_quiet() -> None:
    source = """
    self._test_graph(find_unused_parameters=True)
    limits = config.compute_bucket_size_limits(find_unused_parameters=True)
    """
    assert td803(source) == []


LOADER_FACTORY = """
import torch
from torch.utils.data import DataLoader, DistributedSampler


def make_loader(dataset, batch_size, shuffle=False, distributed=False):
    if distributed:
        sampler = DistributedSampler(dataset, shuffle=shuffle){mark}
    else:
        sampler = None
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler,
                      shuffle=shuffle and sampler is None)


def fit(model, optimizer, train_set, valid_set, ddp):
    loader = make_loader(train_set, 32, shuffle=True, distributed={single})
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()


def fit_ddp(model, optimizer, train_set):
    loader = make_loader(train_set, 32, shuffle={ddp_shuffle}, distributed=True)
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()


def predict(model, dataset, ddp):
    return [model(x) for x, _ in make_loader(dataset, 64, distributed=ddp)]
"""


def test_a_sampler_factory_whose_every_call_turns_shuffling_off_is_quiet() -> None:
    """Uni-Mol's NNDataLoader: the single-process fit passes ``distributed=False``, the
    DDP fit ``shuffle=False``, prediction keeps the default ``shuffle=False``: no call
    gets a shuffling DistributedSampler."""
    quiet = LOADER_FACTORY.format(mark="", single="False", ddp_shuffle="False")
    assert lint_codes(quiet, "TD801", "TD001") == []
    # the DDP fit shuffles: its epochs replay one order
    shuffled = LOADER_FACTORY.format(mark="  # expect: TD801", single="False", ddp_shuffle="True")
    assert_marked(shuffled, "TD801")
    # the flag is not a constant at one call: the sampler may shuffle there
    unknown = LOADER_FACTORY.format(mark="  # expect: TD801", single="ddp", ddp_shuffle="False")
    assert_marked(unknown, "TD801")


_CONDITIONAL_SAMPLER = """
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_loader(dataset, distributed):
    sampler = DistributedSampler(dataset{shuffle}) if distributed else None
    return DataLoader(dataset, batch_size=4, sampler=sampler, shuffle=sampler is None)


def main(model, distributed):
    dataset = TensorDataset(torch.randn(16, 2), torch.randn(16, 1))
    loader = make_loader(dataset, {passed})
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
{epoch_body}
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
"""


@pytest.mark.parametrize(
    ("shuffle", "passed", "epoch_body", "flagged"),
    [
        # a sampler built in a conditional expression is still the loader's sampler
        ("", "distributed", "        pass", True),
        # every call turns the condition off, the shuffle is off, or the epoch is set
        ("", "False", "        pass", False),
        (", shuffle=False", "distributed", "        pass", False),
        ("", "distributed", "        loader.sampler.set_epoch(epoch)", False),
    ],
)
def test_td801_a_sampler_built_in_a_conditional_expression(
    shuffle: str, passed: str, epoch_body: str, flagged: bool
) -> None:
    source = _CONDITIONAL_SAMPLER.format(shuffle=shuffle, passed=passed, epoch_body=epoch_body)
    found = lint_findings(source, "TD801")
    assert bool(found) is flagged, found
    # the name may hold None: no automatic `sampler.set_epoch(...)` that would fail on it
    assert all(f.fix is None for f in found)


def test_td801_the_distributed_branch_of_a_sampler_choice_is_reported_without_a_fix() -> None:
    """DNABERT, as the older Hugging Face example scripts: a random sampler on one GPU,
    a DistributedSampler otherwise, and an epoch loop that never sets its epoch."""
    source = """
import torch
from torch.utils.data import DataLoader, RandomSampler
from torch.utils.data.distributed import DistributedSampler


def train(args, dataset, model, optimizer):
    sampler = RandomSampler(dataset) if args.local_rank == -1 else DistributedSampler(dataset)
    loader = DataLoader(dataset, sampler=sampler, batch_size=8)
    for _ in range(args.epochs):
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
"""
    (found,) = lint_findings(source, "TD801")
    assert found.location.line == 8 and found.fix is None


_VAL_LOADER = """
import torch
from torch.utils.data import DataLoader, DistributedSampler, SequentialSampler


def get_loader(dataset, batch_size=64, sequential=True):
    if sequential:
        sampler = SequentialSampler(dataset)
    else:
        sampler = DistributedSampler(dataset)
    return DataLoader(dataset, sampler=sampler, batch_size=batch_size)


def benchmark(model, dataset, optimizer):
    loader = get_loader(dataset, batch_size=32)
    for epoch in range(3):
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
"""


@pytest.mark.parametrize(
    ("importer", "flagged"),
    [
        # VMamba: no call anywhere passes `sequential`, so the else never runs
        ("loader = utils.get_loader(dataset, batch_size=8)", False),
        # a module importing the file takes the other branch
        ("loader = utils.get_loader(dataset, sequential=False)", True),
        ("loader = utils.get_loader(dataset, 8, False)", True),
        # handed on as a value: calls lint cannot see may pass anything
        ("make = utils.get_loader", True),
    ],
)
def test_td801_a_sampler_in_a_branch_no_call_in_the_project_takes(
    tmp_path: Path, importer: str, flagged: bool
) -> None:
    (tmp_path / "utils.py").write_text(_VAL_LOADER, encoding="utf-8")
    (tmp_path / "tp.py").write_text(
        f"import utils\n\n\ndef main(dataset):\n    {importer}\n", encoding="utf-8"
    )
    report = lint(tmp_path, config=LintConfig(), select=["TD801"], jobs=1)
    assert bool(report.findings) is flagged, report.findings


def test_td804_a_sampler_built_under_a_flag_no_call_sets_is_no_distributed_program() -> None:
    source = """
import torch
import torch.distributed as dist


def feature_loader(dataset, batch_size=128, distributed=False):
    sampler = torch.utils.data.DistributedSampler(
        dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank()
    ) if distributed else None
    return torch.utils.data.DataLoader(dataset, sampler=sampler, shuffle=not distributed)


def main(dataset, model, optimizer):
    loader = feature_loader(dataset, batch_size=64{passed})
    for x, y in loader:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    torch.save(model.state_dict(), "linear_probe.pth")


if __name__ == "__main__":
    main(None, None, None)
"""
    assert lint_codes(source.format(passed=""), "TD804") == []
    assert lint_codes(source.format(passed=", distributed=True"), "TD804") == [("TD804", 19)]
