"""TD625 scheduler-rebuilt-in-loop: a schedule restarted on every pass of training."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings

TRAIN = """
    def fit_batches(model, optimizer, loader):
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
"""


def test_a_scheduler_built_in_the_epoch_loop_is_flagged() -> None:
    source = (
        """
    import torch
    from torch.optim import lr_scheduler
    """
        + TRAIN
        + """
    def main(model, loader):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            scheduler = lr_scheduler.StepLR(optimizer, step_size=3)  # expect: TD625
            plateau = lr_scheduler.ReduceLROnPlateau(optimizer)  # expect: TD625
            fit_batches(model, optimizer, loader)
            scheduler.step()
            plateau.step(0.0)
    """
    )
    assert_marked(source, "TD625")
    messages = [f.message for f in lint_findings(source, "TD625")]
    assert "on every pass of the loop at line 13" in messages[0]
    assert "never gets past the first step" in messages[0]
    assert "forgets its best value and patience" in messages[1]


def test_a_helper_called_every_epoch_that_builds_its_own_scheduler_is_flagged() -> None:
    source = """
        import torch
        from torch.optim.lr_scheduler import MultiStepLR

        class Trainer:
            def fit(self, loader):
                for epoch in range(5):
                    self.epoch(self.optimizer, loader)

            def epoch(self, optimizer, loader):
                schedule = MultiStepLR(optimizer, milestones=[2, 4])  # expect: TD625
                for x, y in loader:
                    optimizer.zero_grad()
                    torch.nn.functional.mse_loss(self.model(x), y).backward()
                    optimizer.step()
                schedule.step()
        """
    assert_marked(source, "TD625")
    (found,) = lint_findings(source, "TD625")
    assert "every call of `epoch()`, which the loop at line 7 makes on every pass" in found.message


def test_schedules_built_once_per_stage_resumed_or_cycled_per_pass_stay_quiet() -> None:
    source = (
        """
    import torch
    from torch.optim.lr_scheduler import CosineAnnealingLR, StepLR
    """
        + TRAIN
        + """
    def once(model, loader):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = StepLR(optimizer, 3)
        for epoch in range(10):
            fit_batches(model, optimizer, loader)
            scheduler.step()

    def stages(model, loader):
        for stage in range(3):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scheduler = StepLR(optimizer, 3)
            for epoch in range(4):
                fit_batches(model, optimizer, loader)
                scheduler.step()

    def resumed(model, loader, optimizer):
        for epoch in range(10):
            scheduler = StepLR(optimizer, 3, last_epoch=epoch - 1)
            fit_batches(model, optimizer, loader)
            scheduler.step()

    def cycles(model, loader, optimizer):
        for epoch in range(10):
            scheduler = CosineAnnealingLR(optimizer, T_max=len(loader))
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
                scheduler.step()

    def not_training(optimizer):
        for name in ("a", "b"):
            scheduler = StepLR(optimizer, 3)
    """
    )
    assert lint_codes(source, "TD625") == []


def test_a_schedule_built_on_one_pass_for_a_new_stage_is_quiet() -> None:
    """AlphaPose: at ``if i == cfg.DPG_MILESTONE:`` the loop resets the learning rate by hand
    and builds a new MultiStepLR for the next stage, once. A rebuild on every pass after a
    point (``if i >= warmup:``) or on a period still restarts the schedule again and
    again."""
    source = (
        """
    import torch
    from torch.optim import lr_scheduler
    """
        + TRAIN
        + """
    def stages(model, loader, milestone):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = lr_scheduler.MultiStepLR(optimizer, milestones=[30, 60])
        for i in range(100):
            fit_batches(model, optimizer, loader)
            scheduler.step()
            if i == milestone:
                for group in optimizer.param_groups:
                    group["lr"] = 0.1
                scheduler = lr_scheduler.MultiStepLR(optimizer, milestones=[10, 20])

    def after_warmup(model, loader, warmup):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(100):
            fit_batches(model, optimizer, loader)
            if i >= warmup:
                scheduler = lr_scheduler.StepLR(optimizer, step_size=3)  # expect: TD625
                scheduler.step()
    """
    )
    assert_marked(source, "TD625")
