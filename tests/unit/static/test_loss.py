"""Lint rules TD301-TD305: what activation reaches which loss."""

from __future__ import annotations

import textwrap

from tests.unit.static.helpers import lint_codes, lint_findings
from torchdoctor.findings import Applicability, Fix
from torchdoctor.static.fixes import apply_fixes

CODES = ("TD301", "TD302", "TD303", "TD304", "TD305")


def applied(source: str, fix: Fix | None) -> str:
    """The dedented source with one finding's fix applied (the fix must exist and apply)."""
    assert fix is not None, "the finding has no fix"
    text, count = apply_fixes(textwrap.dedent(source), [fix])
    assert count == 1, "the fix did not apply"
    return text


# --- flagged ---------------------------------------------------------------------------------


def test_softmax_written_into_functional_cross_entropy_is_flagged_with_an_unsafe_fix() -> None:
    source = """
        import torch.nn.functional as F

        def step(logits, y):
            return F.cross_entropy(F.softmax(logits, dim=1), y)
        """
    [found] = lint_findings(source, *CODES)
    assert (found.code, found.location.line) == ("TD301", 5)
    assert "double softmax" in found.message
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    assert "return F.cross_entropy(logits, y)" in applied(source, found.fix)


def test_model_whose_forward_ends_in_softmax_is_followed_into_the_criterion() -> None:
    source = """
        import torch
        from torch import nn

        def train(loader):
            model = Net()
            criterion = nn.CrossEntropyLoss()
            for x, y in loader:
                loss = criterion(model(x), y)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def forward(self, x):
                return torch.softmax(self.fc(x), dim=1)
        """
    [found] = lint_findings(source, *CODES)
    assert (found.code, found.location.line) == ("TD301", 9)
    assert "`forward` of `Net` (line 17)" in found.message
    assert found.fix is None


def test_softmax_followed_through_a_local_variable_and_an_alias_of_torch() -> None:
    source = """
        import torch as T

        def step(model, x, y):
            criterion = T.nn.CrossEntropyLoss()
            probs = T.softmax(model(x), 1)
            return criterion(probs, y)
        """
    assert lint_codes(source, *CODES) == [("TD301", 7)]


def test_sequential_ending_in_softmax_module_is_flagged() -> None:
    source = """
        from torch import nn

        model = nn.Sequential(nn.Linear(8, 4), nn.Softmax(dim=1))
        loss_fn = nn.CrossEntropyLoss()

        def step(x, y):
            return loss_fn(model(x), y)
        """
    [found] = lint_findings(source, *CODES)
    assert (found.code, found.location.line) == ("TD301", 8)
    assert "nn.Softmax(dim=1)" in found.message


def test_criterion_and_model_unpacked_from_a_factory_function_are_followed() -> None:
    source = """
        import torch
        from torch import nn

        class Net(nn.Module):
            def forward(self, x):
                return torch.log_softmax(x, dim=1)

        def make():
            return Net(), nn.CrossEntropyLoss()

        def main(x, y):
            model, criterion = make()
            return criterion(model(x), y)
        """
    assert lint_codes(source, *CODES) == [("TD302", 14)]


def test_log_of_softmax_into_cross_entropy_is_reported_as_log_softmax() -> None:
    source = """
        import torch
        import torch.nn.functional as F

        def step(logits, y):
            return F.cross_entropy(torch.log(F.softmax(logits, 1)), y)
        """
    [found] = lint_findings(source, *CODES)
    assert found.code == "TD302"
    assert found.severity.value == "info"


def test_sigmoid_method_into_bce_with_logits_is_flagged() -> None:
    source = """
        from torch import nn

        class Trainer:
            def __init__(self):
                self.criterion = nn.BCEWithLogitsLoss()

            def step(self, model, x, y):
                return self.criterion(model(x).sigmoid(), y)
        """
    [found] = lint_findings(source, *CODES)
    assert (found.code, found.location.line) == ("TD303", 9)
    assert found.fix is not None
    assert "self.criterion(model(x), y)" in applied(source, found.fix)


def test_functional_bce_after_sigmoid_gets_the_fused_loss_as_fix() -> None:
    source = """
        import torch
        import torch.nn.functional as F

        def step(logits, y):
            return F.binary_cross_entropy(torch.sigmoid(logits), y)
        """
    [found] = lint_findings(source, *CODES)
    assert (found.code, found.location.line) == ("TD304", 6)
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    assert "F.binary_cross_entropy_with_logits(logits, y)" in applied(source, found.fix)


def test_bce_criterion_used_once_is_switched_to_bce_with_logits() -> None:
    source = """
        import torch
        from torch import nn

        criterion = nn.BCELoss(reduction="sum")

        def step(logits, y):
            return criterion(torch.sigmoid(logits), y)
        """
    [found] = lint_findings(source, *CODES)
    assert found.code == "TD304"
    assert found.fix is not None
    fixed = applied(source, found.fix)
    assert 'criterion = nn.BCEWithLogitsLoss(reduction="sum")' in fixed
    assert "return criterion(logits, y)" in fixed


def test_nll_loss_on_raw_scores_of_a_linear_model_is_flagged() -> None:
    source = """
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(16, 5)

            def forward(self, x):
                scores = self.head(x)
                return scores

        def train(loader):
            model, criterion = Net(), nn.NLLLoss()
            for x, y in loader:
                criterion(model(x), y).backward()
        """
    [found] = lint_findings(source, *CODES)
    assert (found.code, found.location.line) == ("TD305", 16)
    assert "raw scores" in found.message


def test_nll_loss_on_softmax_probabilities_is_flagged() -> None:
    source = """
        import torch.nn.functional as F

        def step(logits, y):
            probs = F.softmax(logits, dim=-1)
            return F.nll_loss(probs, y)
        """
    assert lint_codes(source, *CODES) == [("TD305", 6)]


# --- quiet -----------------------------------------------------------------------------------


def test_logits_into_cross_entropy_stay_quiet() -> None:
    source = """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def forward(self, x):
                return self.fc(x)

        def train(loader):
            model, criterion = Net(), nn.CrossEntropyLoss()
            for x, y in loader:
                logits = model(x)
                loss = criterion(logits, y)
                probs = torch.softmax(logits, dim=1)
                accuracy = (probs.argmax(1) == y).float().mean()
        """
    assert lint_codes(source, *CODES) == []


def test_nll_loss_after_log_softmax_stays_quiet() -> None:
    source = """
        import torch.nn.functional as F
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def forward(self, x):
                return F.log_softmax(self.fc(x), dim=1)

        def step(x, y):
            return nn.NLLLoss()(Net()(x), y)
        """
    assert lint_codes(source, *CODES) == []


def test_forward_that_applies_softmax_only_in_eval_mode_stays_quiet() -> None:
    source = """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def forward(self, x):
                logits = self.fc(x)
                if self.training:
                    return logits
                return torch.softmax(logits, dim=1)

        def step(x, y):
            return nn.CrossEntropyLoss()(Net()(x), y)
        """
    assert lint_codes(source, *CODES) == []


def test_softmax_assigned_only_in_eval_mode_stays_quiet() -> None:
    source = """
        import torch.nn.functional as F
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def forward(self, x):
                x = self.fc(x)
                if not self.training:
                    x = F.softmax(x, dim=1)
                return x

        def step(x, y):
            return F.cross_entropy(Net()(x), y)
        """
    assert lint_codes(source, *CODES) == []


def test_a_rebound_variable_is_judged_by_its_latest_value() -> None:
    source = """
        import torch
        import torch.nn.functional as F

        def step(model, x, y):
            out = torch.softmax(x, dim=1)
            out = model(x)
            return F.cross_entropy(out, y)
        """
    assert lint_codes(source, *CODES) == []


def test_sigmoid_for_predictions_next_to_a_fused_loss_stays_quiet() -> None:
    source = """
        import torch
        from torch import nn

        criterion = nn.BCEWithLogitsLoss()

        def step(model, x, y):
            logits = model(x)
            loss = criterion(logits, y)
            predictions = torch.sigmoid(logits.detach()) > 0.5
            return loss, predictions
        """
    assert lint_codes(source, *CODES) == []


def test_probabilities_into_losses_that_expect_them_stay_quiet() -> None:
    source = """
        import torch
        import torch.nn.functional as F
        from torch import nn

        def step(logits, target_probs, teacher_logits):
            mse = F.mse_loss(torch.softmax(logits, 1), target_probs)
            kl = nn.KLDivLoss(reduction="batchmean")(
                F.log_softmax(logits, 1), F.softmax(teacher_logits, 1))
            bce = nn.BCELoss()(target_probs, target_probs.round())
            return mse + kl + bce
        """
    assert lint_codes(source, *CODES) == []


def test_losses_of_detached_probabilities_are_metrics_and_stay_quiet() -> None:
    source = """
        import torch
        import torch.nn.functional as F

        def log_metrics(logits, y, target):
            probs = torch.sigmoid(logits).detach()
            bce = F.binary_cross_entropy(probs, target)
            ce = F.cross_entropy(torch.softmax(logits, 1).detach(), y)
            return bce.item(), ce.item()
        """
    assert lint_codes(source, *CODES) == []


def test_a_local_function_named_cross_entropy_is_not_torchs() -> None:
    source = """
        import torch

        def cross_entropy(probs, y):
            return -(probs[range(len(y)), y]).log().mean()

        def step(logits, y):
            return cross_entropy(torch.softmax(logits, 1), y)
        """
    assert lint_codes(source, *CODES) == []


def test_a_model_from_another_library_is_not_guessed() -> None:
    source = """
        import torchvision
        from torch import nn

        model = torchvision.models.resnet18(num_classes=10)
        criterion = nn.NLLLoss()

        def step(x, y):
            return criterion(model(x), y)
        """
    assert lint_codes(source, *CODES) == []


def test_sequential_ending_in_linear_into_cross_entropy_stays_quiet() -> None:
    source = """
        from torch import nn

        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

        def step(x, y):
            return criterion(model(x), y)
        """
    assert lint_codes(source, *CODES) == []


def test_a_forward_returning_logits_and_probabilities_is_not_guessed() -> None:
    source = """
        import torch
        from torch import nn

        class Net(nn.Module):
            def forward(self, x):
                return x, torch.softmax(x, 1)

        def step(x, y):
            logits, probs = Net()(x)
            return nn.CrossEntropyLoss()(logits, y)
        """
    assert lint_codes(source, *CODES) == []


def test_no_fix_when_the_criterion_serves_several_calls() -> None:
    source = """
        import torch
        from torch import nn

        criterion = nn.BCELoss()

        def step(logits, probs, y):
            first = criterion(torch.sigmoid(logits), y)
            second = criterion(probs, y)
            return first + second
        """
    [found] = lint_findings(source, *CODES)
    assert found.code == "TD304" and found.fix is None
