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


def test_a_loss_scaled_to_its_batch_sum_before_accumulation_stays_quiet() -> None:
    """pytorch-frame's example: ``loss *= len(tf.y)`` turns the batch mean into the
    batch's sum before it is added, so dividing by the example count is right; so do
    ``loss = loss * n`` and ``loss.mul_(n)``."""
    source = """
        import torch
        import torch.nn.functional as F

        def train(model, train_loader, optimizer, device):
            loss_accum = torch.zeros(1, device=device).squeeze_()
            total_count = 0
            for tf in train_loader:
                pred = model(tf)
                loss = F.cross_entropy(pred, tf.y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                total_count += len(tf.y)
                loss *= len(tf.y)
                loss_accum += loss
            return loss_accum / total_count

        def rebound(model, loader):
            total, seen = 0.0, 0
            for x, y in loader:
                loss = F.mse_loss(model(x), y)
                loss = loss * x.size(0)
                total += loss.item()
                seen += x.size(0)
            return total / seen

        def mul_in_place(model, loader, batch_size):
            total = 0.0
            for x, y in loader:
                loss = F.mse_loss(model(x), y).detach()
                loss.mul_(y.shape[0])
                total += loss.item()
            return total / len(loader.dataset)

        def scaled_by_a_name(model, loader):
            total = 0.0
            for x, y in loader:
                n = len(y)
                loss = F.l1_loss(model(x), y)
                loss *= n
                total += float(loss)
            return total / len(loader.dataset)
        """
    assert lint_codes(source, "TD311") == []


def test_a_loss_scaled_by_something_else_or_too_late_is_still_flagged() -> None:
    source = """
        import torch.nn.functional as F

        def halved(model, loader):
            total, seen = 0.0, 0
            for x, y in loader:
                loss = F.mse_loss(model(x), y)
                loss *= 0.5
                total += loss.item()
                seen += len(y)
            return total / seen  # expect: TD311

        def scaled_after(model, loader):
            total = 0.0
            for x, y in loader:
                loss = F.mse_loss(model(x), y)
                total += loss.item()
                loss *= len(y)
            return total / len(loader.dataset)  # expect: TD311
        """
    assert_marked(source, "TD311")


_VALIDATION = """
import torch
import torch.nn.functional as F
import tqdm
from torch.utils.data import DataLoader


def validate(model, valloader):
    loader = tqdm.tqdm(valloader)
    total = 0.0
    for x, y in loader:
        total += F.l1_loss(model(x), y).item()
    return total / len(valloader.dataset){mark}
"""


def test_td311_a_loader_every_caller_builds_with_single_examples_is_quiet(tmp_path) -> None:
    """univnet: `validate` is handed the loader that `create_dataloader(..., False)`
    builds in another file, whose `else` arm has `batch_size=1`: each batch mean is one
    example, and dividing by the dataset size is right. A caller handing in a loader of
    larger batches keeps the finding."""
    from torchdoctor.static import LintConfig, lint

    (tmp_path / "loaders.py").write_text(
        "from torch.utils.data import DataLoader\n\n\n"
        "def create_dataloader(dataset, train, batch=16):\n"
        "    if train:\n"
        "        return DataLoader(dataset, batch_size=batch, shuffle=True)\n"
        "    else:\n"
        "        return DataLoader(dataset, batch_size=1)\n"
    )
    (tmp_path / "validation.py").write_text(_VALIDATION.format(mark=""))
    main = (
        "from loaders import create_dataloader\n"
        "from validation import validate\n\n\n"
        "def main(model, data):\n"
        "    valloader = create_dataloader(data, {train})\n"
        "    validate(model, valloader)\n"
    )
    (tmp_path / "train.py").write_text(main.format(train="False"))
    assert not lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD311")
    (tmp_path / "train.py").write_text(main.format(train="True"))
    found = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD311")
    assert [f.location.line for f in found] == [13]


def test_td311_a_loader_handed_in_by_an_unknown_caller_is_still_flagged() -> None:
    assert_marked(_VALIDATION.format(mark="  # expect: TD311"), "TD311")
