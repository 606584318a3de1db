"""TD626 scheduler-stepped-in-evaluation: a training function that steps the schedule,
called for evaluation as well."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings


def test_a_training_function_called_for_validation_and_test_is_flagged() -> None:
    source = """
        import torch

        model = build()
        optimizer = torch.optim.Adam(model.parameters())
        lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 100)

        def train(epoch, loader, partition="train"):
            lr_scheduler.step()  # expect: TD626
            for batch in loader:
                loss = model(batch).mean()
                if partition == "train":
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

        def run_epoch(model, loader, optimizer, scheduler, training=True):
            for x in loader:
                loss = model(x).mean()
                if training:
                    loss.backward()
                    optimizer.step()
                scheduler.step()  # expect: TD626

        for epoch in range(100):
            train(epoch, loaders["train"])
            train(epoch, loaders["valid"], partition="valid")
            run_epoch(model, train_loader, optimizer, lr_scheduler)
            run_epoch(model, val_loader, optimizer, lr_scheduler, training=False)
        """
    assert_marked(source, "TD626")
    (first, _) = lint_findings(source, "TD626")
    assert "`train()` is also called for evaluation" in first.message
    assert 'partition="valid"' in first.message


def test_guarded_steps_and_evaluation_only_functions_stay_quiet() -> None:
    source = """
        import torch

        model = build()
        optimizer = torch.optim.Adam(model.parameters())
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)

        def run(loader, train=True):
            for x in loader:
                loss = model(x).mean()
                if train:
                    loss.backward()
                    optimizer.step()
                    scheduler.step()

        def validate(loader):
            loss = sum(model(x).mean().item() for x in loader)
            plateau.step(loss)
            return loss

        def fit(loader):
            for x in loader:
                model(x).mean().backward()
                optimizer.step()
            scheduler.step()

        for epoch in range(10):
            run(train_loader)
            run(val_loader, train=False)
            fit(train_loader)
            validate(val_loader)
        """
    assert lint_codes(source, "TD626") == []
