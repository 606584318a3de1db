"""Lint rules TD301-TD305: what activation reaches which loss."""

from __future__ import annotations

import textwrap

from tests.unit.static.helpers import lint_codes, lint_findings
from torchdoctor.findings import Applicability, Fix, Severity
from torchdoctor.rules.selection import Selection
from torchdoctor.static.fixes import apply_fixes
from torchdoctor.static.runner import lint_sources

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


# --- probabilities returned by the project's own methods and functions -----------------------

_SCORER = """
    import torch
    from torch import nn

    class LinkScorer(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 1)

        def edge_probabilities(self, pos, neg):
            pos_score = self.fc(pos)
            neg_score = self.fc(neg)
            return pos_score.sigmoid(), neg_score.sigmoid()

        def maybe_probabilities(self, x, raw=False):
            score = self.fc(x)
            if raw:
                return score
            return torch.sigmoid(score)

        def flagged_probabilities(self, x):
            score = self.fc(x)
            return score.sigmoid() if self.training is False else score
    """


def test_a_tuple_of_probabilities_unpacked_from_a_method_is_followed_into_bce() -> None:
    source = (
        _SCORER
        + """
    def train(pos, neg, ones, zeros):
        scorer = LinkScorer()
        criterion = torch.nn.BCELoss()
        scorer = scorer.train()
        pos_prob, neg_prob = scorer.edge_probabilities(pos, neg)
        loss = criterion(pos_prob.squeeze(), ones)
        loss = loss + criterion(neg_prob.view(-1), zeros)
        loss.backward()
    """
    )
    found = lint_findings(source, *CODES)
    assert [(f.code, f.location.line) for f in found] == [("TD304", 30), ("TD304", 31)]
    assert "`LinkScorer.edge_probabilities` (line 13, item 0 of the tuple" in found[0].message
    assert "item 1 of the tuple" in found[1].message
    assert found[0].fix is None  # the activation is in another function


def test_an_item_taken_by_index_from_a_method_call_is_followed() -> None:
    source = (
        _SCORER
        + """
    def train(pos, neg, ones):
        scorer = LinkScorer()
        loss = torch.nn.BCEWithLogitsLoss()(scorer.edge_probabilities(pos, neg)[0].flatten(), ones)
        loss.backward()
    """
    )
    assert lint_codes(source, *CODES) == [("TD303", 27)]


def test_a_method_that_may_return_raw_scores_is_not_guessed() -> None:
    source = (
        _SCORER
        + """
    def train(x, ones):
        scorer = LinkScorer()
        criterion = torch.nn.BCELoss()
        first = criterion(scorer.maybe_probabilities(x), ones)
        second = criterion(scorer.flagged_probabilities(x), ones)
        (first + second).backward()
    """
    )
    assert lint_codes(source, *CODES) == []


def test_a_method_a_subclass_overrides_is_not_guessed() -> None:
    source = (
        _SCORER
        + """
    class LogitScorer(LinkScorer):
        def edge_probabilities(self, pos, neg):
            return self.fc(pos), self.fc(neg)

    def train(scorer: LinkScorer, pos, neg, ones):
        pos_prob, _ = scorer.edge_probabilities(pos, neg)
        torch.nn.BCELoss()(pos_prob, ones).backward()
    """
    )
    assert lint_codes(source, *CODES) == []


def test_a_method_probability_under_no_grad_is_information() -> None:
    source = (
        _SCORER
        + """
    def evaluate(pos, neg, ones):
        scorer = LinkScorer()
        with torch.no_grad():
            pos_prob, _ = scorer.edge_probabilities(pos, neg)
            return torch.nn.BCELoss()(pos_prob, ones).item()
    """
    )
    [found] = lint_findings(source, *CODES)
    assert (found.code, found.location.line, found.severity) == ("TD304", 29, Severity.INFO)


def test_a_method_called_on_self_and_a_helper_function_are_followed() -> None:
    source = """
        import torch
        import torch.nn.functional as F
        from torch import nn

        def predict(model, x):
            return torch.sigmoid(model(x))

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 1)

            def forward(self, x):
                return self.fc(x)

            def probabilities(self, x):
                return self(x).sigmoid()

            def training_step(self, batch):
                x, y = batch
                return F.binary_cross_entropy(self.probabilities(x), y)

        def step(model, x, y):
            return F.binary_cross_entropy_with_logits(predict(model, x), y)
        """
    assert lint_codes(source, *CODES) == [("TD304", 22), ("TD303", 25)]


_PROJECT_NET = """
import torch
from torch import nn

class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)
        self.out = nn.Sigmoid()

    def forward(self, x):
        return self.out(self.fc(x))

    def edge_probabilities(self, pos, neg):
        pos_score = self.fc(pos)
        return pos_score.sigmoid().squeeze(-1), self.out(self.fc(neg))

    def flagged(self, x):
        score = self.fc(x)
        return score.sigmoid() if self.training is False else score

class Base(nn.Module):
    def probabilities(self, x):
        return torch.sigmoid(x)

class Raw(Base):
    def probabilities(self, x):
        return x
"""


def _project(train: str) -> list[tuple[str, int, Severity]]:
    sources = [
        ("proj/models/net.py", textwrap.dedent(_PROJECT_NET)),
        ("proj/train.py", textwrap.dedent(train)),
    ]
    found = lint_sources(sources, Selection.from_options(CODES))
    return sorted(
        (f.code, f.location.line or 0, f.severity)
        for f in found
        if f.location.path and f.location.path.endswith("train.py")
    )


def test_methods_and_forward_of_a_model_class_of_another_file_are_followed() -> None:
    assert _project("""
import torch
from models.net import Scorer

def main(pos, neg, ones, zeros):
    scorer = Scorer()
    criterion = torch.nn.BCELoss()
    pos_prob, neg_prob = scorer.edge_probabilities(pos, neg)
    loss = criterion(pos_prob, ones) + criterion(scorer(pos), ones)
    loss = loss + criterion(neg_prob.view(-1), zeros)
    loss.backward()
    with torch.no_grad():
        criterion(scorer.edge_probabilities(pos, neg)[1], zeros)
""") == [
        ("TD304", 9, Severity.WARNING),
        ("TD304", 9, Severity.WARNING),
        ("TD304", 10, Severity.WARNING),
        ("TD304", 13, Severity.INFO),
    ]


def test_methods_of_another_file_that_may_return_scores_or_are_overridden_are_quiet() -> None:
    assert (
        _project("""
import torch
from models.net import Base, Scorer

def main(model: Base, x, ones):
    criterion = torch.nn.BCELoss()
    loss = criterion(Scorer().flagged(x), ones) + criterion(model.probabilities(x), ones)
    loss.backward()
""")
        == []
    )


def test_one_model_output_fed_to_one_loss_at_several_lines_is_one_finding() -> None:
    # A GAN trains its discriminator on real and fake images and its generator against
    # it: three calls of one loss on one forward's sigmoid, and one fix.
    [found] = lint_findings(
        """
        import torch
        from torch import nn

        class Discriminator(nn.Module):
            def __init__(self):
                super().__init__()
                self.model = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())

            def forward(self, x):
                return self.model(x)

        def train(generator, loader, opt_g, opt_d):
            discriminator = Discriminator()
            adversarial_loss = torch.nn.BCELoss()
            for real, ones, zeros in loader:
                fake = generator(real)
                g_loss = adversarial_loss(discriminator(fake), ones)
                g_loss.backward()
                opt_g.step()
                real_loss = adversarial_loss(discriminator(real), ones)
                fake_loss = adversarial_loss(discriminator(fake.detach()), zeros)
                (real_loss + fake_loss).backward()
                opt_d.step()
        """,
        "TD304",
    )
    assert found.location.line == 18
    assert "as it does at lines 21, 22" in found.message
    assert found.evidence["other_lines"] == [21, 22]


def test_an_activation_written_into_each_call_is_reported_at_each() -> None:
    # Each call applies the sigmoid itself: each is its own edit, and each keeps its fix.
    found = lint_findings(
        """
        import torch
        import torch.nn.functional as F

        def step(real_logits, fake_logits, ones, zeros):
            real_loss = F.binary_cross_entropy(torch.sigmoid(real_logits), ones)
            fake_loss = F.binary_cross_entropy(torch.sigmoid(fake_logits), zeros)
            return real_loss + fake_loss
        """,
        "TD304",
    )
    assert [f.location.line for f in found] == [6, 7]
    assert all(f.fix is not None for f in found)


def test_td305_reads_a_layer_attribute_by_what_it_holds_not_by_its_name() -> None:
    """TencentPretrain's targets: ``self.softmax = nn.LogSoftmax(dim=-1)`` into
    ``NLLLoss`` is right; the same attribute holding ``nn.Softmax`` is the bug."""
    source = """
    import torch.nn as nn
    class Target(nn.Module):
        def __init__(self, hidden, vocab):
            super().__init__()
            self.output_layer = nn.Linear(hidden, vocab)
            self.softmax = nn.{layer}(dim=-1)
            self.criterion = nn.NLLLoss()
        def forward(self, memory, tgt):
            return self.criterion(self.softmax(self.output_layer(memory)), tgt)
    """
    assert lint_codes(source.format(layer="LogSoftmax"), "TD305") == []
    assert lint_codes(source.format(layer="Softmax"), "TD305") == [("TD305", 10)]


def test_a_sigmoid_bce_its_code_documents_as_unstable_is_information() -> None:
    """PyKEEN's ``BCEAfterSigmoidLoss``, "the numerically unstable version of explicit
    Sigmoid + BCE loss", kept beside the stable loss for comparison: the author knows."""
    template = textwrap.dedent(
        '''
        import torch.nn.functional as F
        from torch import nn

        class BCEAfterSigmoidLoss(nn.Module):
            """DOC"""

            def forward(self, x, target):
                return F.binary_cross_entropy(x.sigmoid(), target)
        '''
    )
    documented = template.replace("DOC", "The numerically unstable version of sigmoid + BCE.")
    [found] = lint_findings(documented, "TD304")
    assert found.severity is Severity.INFO
    assert "documents that instability" in found.message
    plain = template.replace("DOC", "Binary cross entropy after a sigmoid.")
    [found] = lint_findings(plain, "TD304")
    assert found.severity is Severity.WARNING
