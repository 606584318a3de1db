"""TD311 loss-average-mismatch: a loss reduction and the divisor of its average disagree."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings
from torchdoctor.findings import Severity


def test_batch_means_divided_by_the_dataset_size_are_flagged() -> None:
    source = """
        import torch
        from torch import nn

        def test(model, test_loader):
            criterion = nn.CrossEntropyLoss()
            test_loss = 0
            with torch.no_grad():
                for data, target in test_loader:
                    test_loss += criterion(model(data), target).item()
            test_loss /= len(test_loader.dataset)  # expect: TD311
            return test_loss
        """
    assert_marked(source, "TD311")
    (found,) = lint_findings(source, "TD311")
    assert found.severity is Severity.WARNING
    assert "too small by the batch size" in found.message
    assert "`len(test_loader.dataset)`, the number of examples" in found.message


def test_counters_names_and_summed_losses_over_batches_are_flagged() -> None:
    source = """
        import torch.nn.functional as F
        from torch import nn

        def validate(model, loader):
            total, seen = 0.0, 0
            for x, y in loader:
                loss = F.mse_loss(model(x), y)
                total += float(loss.detach())
                seen += len(y)
            print(f"val loss {total / seen:.4f}")  # expect: TD311

        def validate_sum(model, loader, val_dataset):
            criterion = nn.L1Loss(reduction="sum")
            total, batches = 0.0, 0
            for x, y in loader:
                total += criterion(model(x), y).item()
                batches += 1
            return total / batches, total / len(val_dataset)  # expect: TD311
        """
    assert_marked(source, "TD311")
    messages = [f.message for f in lint_findings(source, "TD311")]
    assert "too large by the batch size" in messages[1]


def test_matching_reductions_and_divisors_stay_quiet() -> None:
    source = """
        import torch.nn.functional as F
        from torch import nn
        from torch.utils.data import DataLoader

        def weighted(model, loader):
            total, seen = 0.0, 0
            for x, y in loader:
                total += F.mse_loss(model(x), y).item() * x.size(0)
                seen += x.size(0)
            return total / seen, total / len(loader.dataset)

        def per_batch(model, loader):
            total = 0.0
            for x, y in loader:
                total += F.mse_loss(model(x), y).item()
            return total / len(loader)

        def summed(model, loader):
            total = 0.0
            for x, y in loader:
                total += F.cross_entropy(model(x), y, reduction="sum").item()
            return total / len(loader.dataset)

        def one_per_batch(model, dataset):
            total = 0.0
            for x, y in DataLoader(dataset):
                total += F.mse_loss(model(x), y).item()
            return total / len(dataset)

        def unknown(model, loader, criterion, num_samples):
            total = 0.0
            for x, y in loader:
                total += criterion(model(x), y).item()
                other += F.l1_loss(model(x), y, reduction=mode).item()
            return total / len(loader.dataset), other / len(loader.dataset), total / num_samples
        """
    assert lint_codes(source, "TD311") == []
