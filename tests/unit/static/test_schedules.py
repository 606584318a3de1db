"""TD615 epoch-scheduler-stepped-per-batch."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings

HEADER = """
import torch
from torch import nn
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader
"""


def test_epoch_schedulers_in_the_batch_loop_are_flagged() -> None:
    assert_marked(
        HEADER
        + """
def train(model, dataset, epochs):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
    multi = lr_scheduler.MultiStepLR(opt, milestones=[30, 60, 90])
    decay = lr_scheduler.ExponentialLR(opt, gamma=0.95)
    plateau = lr_scheduler.ReduceLROnPlateau(opt)
    cosine = lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    loader = DataLoader(dataset, batch_size=8, shuffle=True)
    for epoch in range(epochs):
        for x, y in loader:
            loss = model(x).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            step.step()  # expect: TD615
            multi.step()  # expect: TD615
            decay.step()  # expect: TD615
            plateau.step(loss)  # expect: TD615
            cosine.step()  # expect: TD615
""",
        "TD615",
    )


def test_scheduler_passed_to_an_epoch_function_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def train_one_epoch(model, loader, opt, scheduler):
    for x, y in loader:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
        scheduler.step()  # expect: TD615

def main(model, loader):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = lr_scheduler.StepLR(opt, 10)
    for epoch in range(5):
        train_one_epoch(model, loader, opt, sched)
""",
        "TD615",
    )


def test_scheduler_stepped_from_an_iteration_handler_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def attach(trainer, opt):
    sched = lr_scheduler.StepLR(opt, step_size=2)

    @trainer.on(Events.ITERATION_COMPLETED)
    def step_schedule(engine):
        sched.step()  # expect: TD615
""",
        "TD615",
    )


def test_per_epoch_and_per_step_schedules_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def train(model, loader, epochs, total):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = lr_scheduler.StepLR(opt, step_size=30)
    cycle = lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=total)
    warm = lr_scheduler.LambdaLR(opt, lambda s: min(1.0, s / 100))
    cosine = lr_scheduler.CosineAnnealingLR(opt, T_max=total)
    for epoch in range(epochs):
        for x, y in loader:
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            cycle.step()
            warm.step()
            cosine.step()
        step.step()
""",
            "TD615",
        )
        == []
    )


def test_iteration_sized_or_periodic_steps_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def train(model, loader, args):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    by_iteration = lr_scheduler.StepLR(opt, step_size=30000)
    milestones = lr_scheduler.MultiStepLR(opt, milestones=[60000, 80000])
    slow = lr_scheduler.ExponentialLR(opt, gamma=0.9999)
    unknown = lr_scheduler.StepLR(opt, step_size=args.lr_step)
    periodic = lr_scheduler.StepLR(opt, step_size=3)
    for i, (x, y) in enumerate(loader):
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
        by_iteration.step()
        milestones.step()
        slow.step()
        unknown.step()
        if i % len(loader) == 0:
            periodic.step()

def attach(trainer, opt):
    sched = lr_scheduler.StepLR(opt, step_size=2)

    @trainer.on(Events.EPOCH_COMPLETED)
    def step_schedule(engine):
        sched.step()
""",
            "TD615",
        )
        == []
    )


# Round 39's DGL DCRNN: ExponentialLR(0.99) stepped every batch while the learning rate
# stays above a floor; the comparison with the current rate shows the per-batch decay is
# the design.
FLOORED = (
    HEADER
    + """
def get_learning_rate(optimizer):
    return optimizer.param_groups[0]["lr"]

def train(model, loader, args):
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    decay = lr_scheduler.ExponentialLR(opt, gamma=0.99)
    for epoch in range(args.epochs):
        for x, y in loader:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            if {guard}:
                decay.step()
"""
)


def test_a_step_guarded_by_a_floor_on_the_current_rate_is_quiet() -> None:
    for guard in (
        "get_learning_rate(opt) > args.minimum_lr",
        'opt.param_groups[0]["lr"] > 1e-6',
        "decay.get_last_lr()[0] >= args.min_lr",
    ):
        assert lint_codes(FLOORED.format(guard=guard), "TD615") == [], guard
    # A flag named after the rate, or a comparison of something else, is no floor.
    for guard in ("args.lr_decay", "epoch > args.lr_warmup"):
        assert lint_codes(FLOORED.format(guard=guard), "TD615") == [("TD615", 19)], guard


def test_epoch_loops_and_unknown_schedulers_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def train(model, loader, scheduler, epochs):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = lr_scheduler.StepLR(opt, step_size=30)
    for epoch in range(epochs):
        for x, y in loader:
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            scheduler.step()
        step.step()
    while True:
        step.step()
        break
""",
            "TD615",
        )
        == []
    )


def test_lengths_counted_in_batches_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def train(model, train_loader, opt, epochs, args):
    cosine = lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * len(train_loader))
    step = lr_scheduler.StepLR(opt, step_size=args.decay_steps)
    multi = lr_scheduler.MultiStepLR(opt, milestones=args.epoch_iters)
    for epoch in range(epochs):
        for x, y in train_loader:
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            cosine.step()
            step.step()
            multi.step()
""",
            "TD615",
        )
        == []
    )


def test_scheduler_stepped_from_a_started_handler_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def build(trainer, model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = lr_scheduler.StepLR(opt, step_size=1)

    def update(engine, batch):
        opt.zero_grad()
        model(batch).sum().backward()
        opt.step()

    @trainer.on(Events.EPOCH_STARTED)
    def schedule(engine):
        sched.step()  # expect: TD607

    def warm(engine):
        sched.step()  # expect: TD607

    trainer.add_event_handler(Events.ITERATION_STARTED, warm)
""",
        "TD607",
    )


def test_scheduler_stepped_from_completed_handlers_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def build(trainer, model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = lr_scheduler.StepLR(opt, step_size=1)

    def update(engine, batch):
        opt.zero_grad()
        model(batch).sum().backward()
        opt.step()

    @trainer.on(Events.EPOCH_COMPLETED)
    def schedule(engine):
        sched.step()

    @trainer.on(Events.ITERATION_STARTED)
    def log(engine):
        print(sched.get_last_lr())

    @trainer.on(Events.EPOCH_STARTED)
    def maybe(engine):
        if engine.state.epoch > 1:
            sched.step()
""",
            "TD607",
        )
        == []
    )


# The file fires the event itself: where it fires, not what it is called, decides.
_HOOKS = """
    import torch
    from torch import nn

    class Hooks:
        def __init__(self):
            self.table = {{}}

        def register(self, key, fn):
            self.table.setdefault(key, []).append(fn)

        def emit(self, key, *args):
            for fn in self.table.get(key, []):
                fn(*args)

    def main(model, batches, epochs):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [5, 8])
        hooks = Hooks()

        def decay(epoch):
            scheduler.step()  {mark}

        hooks.register({key!r}, decay)
        for epoch in range(epochs):
            {before}
            for x, y in batches:
                optimizer.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
            {after}
"""


def test_a_handler_the_file_fires_before_the_step_is_flagged_whatever_its_name() -> None:
    source = _HOOKS.format(
        key="before_epoch",
        mark="# expect: TD607",
        before='hooks.emit("before_epoch", epoch)',
        after="pass",
    )
    assert_marked(source, "TD607")
    (found,) = lint_findings(source, "TD607")
    assert '`hooks.emit("before_epoch", epoch)` at line' in found.message
    assert found.evidence["optimizer_step_line"] == 30


def test_a_handler_the_file_fires_after_the_step_is_quiet_whatever_its_name() -> None:
    source = _HOOKS.format(
        key="EPOCH_STARTED",  # misleading name: it fires at the end of the epoch
        mark="",
        before="pass",
        after='hooks.emit("EPOCH_STARTED", epoch)',
    )
    assert_marked(source, "TD607")
