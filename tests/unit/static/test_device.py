"""Lint rules TD102, TD104, TD105, TD106: device and dtype."""

from __future__ import annotations

import textwrap

import pytest

from tests.unit.static.helpers import lint_codes, lint_findings
from tests.unit.static.test_loss import applied
from torchdoctor.findings import Applicability, Confidence, Severity

# A training step appended to sources that need "this file trains" for TD102.
TRAINS = """
def step(model, optimizer, loss):
    loss.backward()
    optimizer.step()
"""


# --- TD102 float64-in-training ---------------------------------------------------------------


def test_float64_data_in_a_training_file_is_flagged() -> None:
    source = """
        import torch

        inputs = torch.randn(64, 4, dtype=torch.float64)
        targets = torch.randn(64, 1).to(torch.double)
        torch.set_default_dtype(torch.float64)
        """
    source = textwrap.dedent(source) + TRAINS
    assert lint_codes(source, "TD102") == [("TD102", 4), ("TD102", 5), ("TD102", 6)]


def test_float64_cast_to_match_a_model_made_float64_elsewhere_is_information() -> None:
    """A float64 input handed straight to a module this file never converts (a float32
    module would reject it), or a cast for a matrix product: it matches a model made
    float64 in another file. An elementwise float64 weight on the loss stays a warning."""
    source = """
        import torch

        def meta_step(model, loss_fn, optimiser, shape, labels):
            logits = model(torch.zeros(shape).to("cpu", dtype=torch.double))
            loss = loss_fn(logits, labels)
            loss.backward()
            optimiser.step()

        def predictions(attention, y_onehot):
            return torch.mm(attention, y_onehot.double())

        def weighted(model, x, per_sample, optimiser):
            weights = torch.ones(x.size(0), dtype=torch.float64)
            loss = (weights * per_sample(model(x))).mean()
            loss.backward()
            optimiser.step()
        """
    found = lint_findings(textwrap.dedent(source), "TD102")
    assert [(f.location.line, f.severity.value) for f in found] == [
        (5, "info"),
        (11, "info"),
        (14, "warning"),
    ]
    assert "made so elsewhere" in found[0].message


def test_a_double_model_with_data_made_float64_on_purpose_is_one_note() -> None:
    # The program asks for float64 data itself: one finding, information, at the model.
    source = """
        import torch

        model = torch.nn.Linear(4, 1).double()
        inputs = torch.randn(64, 4, dtype=torch.float64)
        targets = torch.randn(64, 1).to(torch.double)
        torch.set_default_dtype(torch.float64)
        """
    found = lint_findings(textwrap.dedent(source) + TRAINS, "TD102")
    assert [(f.location.line, f.severity.value) for f in found] == [(4, "info")]


def test_float64_message_names_the_call() -> None:
    source = """
        import torch as T

        def train(model, loader, optimizer):
            for x, y in loader:
                loss = ((model(x.double()) - y) ** 2).mean()
                loss.backward()
                optimizer.step()
        """
    [found] = lint_findings(source, "TD102")
    assert found.location.line == 6
    assert "`x.double()`" in found.message
    assert "float32" in found.fix_hint


def test_float64_outside_training_code_stays_quiet() -> None:
    source = """
        import torch

        def analyse(samples):
            return torch.tensor(samples, dtype=torch.float64).var()
        """
    assert lint_codes(source, "TD102") == []


def test_float64_metric_accumulators_stay_quiet() -> None:
    source = """
        import torch

        def train(model, loader, optimizer):
            total = torch.zeros((), dtype=torch.float64)
            running_loss = torch.tensor(0.0, dtype=torch.float64)
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                total += loss.detach().double()
                accuracy = (model(x).argmax(1) == y).double().mean()
                mean = loss.detach().double().item()
        """
    assert lint_codes(source, "TD102") == []


def test_float64_in_evaluation_under_no_grad_stays_quiet() -> None:
    source = """
        import torch

        @torch.no_grad()
        def evaluate(model, loader):
            return sum(model(x).double().sum() for x, _ in loader)

        def train(model, optimizer, loss):
            with torch.no_grad():
                reference = model.weight.double().norm()
            loss.backward()
            optimizer.step()
        """
    assert lint_codes(source, "TD102") == []


def test_numerical_tests_may_use_float64() -> None:
    source = """
        import torch

        def test_gradient(model):
            x = torch.randn(3, dtype=torch.float64, requires_grad=True)
            model(x).sum().backward()

        def check(fn):
            x = torch.randn(3, dtype=torch.double, requires_grad=True)
            torch.autograd.gradcheck(fn, (x,))
        """
    source = textwrap.dedent(source) + TRAINS
    assert lint_codes(source, "TD102") == []
    helper = source.replace("test_gradient", "helper")
    assert lint_codes(helper, "TD102", path="test_model.py") == []
    assert lint_codes(helper, "TD102", path="project/tests/numerics.py") == []
    assert lint_codes(helper, "TD102", path="project/train.py") == [("TD102", 5)]


def test_dtype_comparisons_and_numpy_float64_stay_quiet() -> None:
    source = """
        import numpy as np
        import torch

        def train(model, batch, optimizer):
            if batch.dtype == torch.float64:
                batch = batch.float()
            weights = np.zeros(3, dtype=np.float64)
            model(batch).sum().backward()
            optimizer.step()
        """
    assert lint_codes(source, "TD102") == []


# --- TD104 target-dtype-wrong-for-loss -------------------------------------------------------


def test_loop_targets_cast_to_float_for_cross_entropy_are_flagged_with_a_fix() -> None:
    source = """
        from torch import nn

        def train(model, loader, device):
            criterion = nn.CrossEntropyLoss()
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                loss = criterion(model(x), y.float())
        """
    [found] = lint_findings(source, "TD104")
    assert found.location.line == 8
    assert found.confidence is Confidence.HIGH
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    assert "criterion(model(x), y.long())" in applied(source, found.fix)


def test_named_class_labels_into_nll_loss_are_flagged_with_medium_confidence() -> None:
    source = """
        import torch
        import torch.nn.functional as F

        def loss_fn(log_probs, labels):
            return F.nll_loss(log_probs, labels.to(torch.float32))

        def distill(student, teacher):
            return F.cross_entropy(student, teacher.argmax(dim=1).float())
        """
    found = lint_findings(source, "TD104")
    assert [(f.location.line, f.confidence) for f in found] == [
        (6, Confidence.MEDIUM),
        (9, Confidence.HIGH),
    ]
    assert found[0].fix is None  # `.to(dtype)` is not rewritten


def test_a_cast_made_a_few_lines_before_the_loss_is_followed() -> None:
    source = """
        from torch import nn

        def train(model, loader):
            criterion = nn.CrossEntropyLoss()
            for x, y in loader:
                y = y.float()
                loss = criterion(model(x), y)
        """
    [found] = lint_findings(source, "TD104")
    assert found.location.line == 7
    assert "(line 8)" in found.message


def test_soft_labels_stay_quiet() -> None:
    source = """
        import torch.nn.functional as F

        def step(model, x, y, y2, lam, soft_targets, num_classes):
            logits = model(x)
            one = F.cross_entropy(logits, F.one_hot(y, num_classes).float())
            mixed = lam * F.one_hot(y, num_classes) + (1 - lam) * F.one_hot(y2, num_classes)
            two = F.cross_entropy(logits, mixed.float())
            three = F.cross_entropy(logits, soft_targets.float())
            onehot = F.one_hot(y, num_classes)
            four = F.cross_entropy(logits, onehot.float())
            return one + two + three + four
        """
    assert lint_codes(source, "TD104") == []


def test_a_cast_in_the_other_arm_of_an_if_does_not_reach_the_loss() -> None:
    # ResNeSt's smoothed loss: float targets for the hand-written NLL in training, the
    # original class indices for cross_entropy in the else arm.
    source = """
        import torch

        class SmoothedLoss(torch.nn.Module):
            def forward(self, x, target):
                if self.training:
                    target = target.float()
                    return -(torch.log_softmax(x, -1) * target).sum(-1).mean()
                else:
                    return torch.nn.functional.cross_entropy(x, target)

        def evaluate(model, loader, train):
            for x, y in loader:
                if train:
                    y = y.float()
                elif y.dim() > 1:
                    y = y.argmax(1)
                else:
                    loss = torch.nn.functional.cross_entropy(model(x), y)
        """
    assert lint_codes(source, "TD104") == []


def test_a_cast_before_an_if_still_reaches_both_arms() -> None:
    source = """
        import torch.nn.functional as F

        def train(model, loader, aux):
            for x, y in loader:
                y = y.float()
                if aux:
                    loss = F.cross_entropy(model(x), y)
                else:
                    loss = F.nll_loss(model(x), y)
        """
    assert [f.location.line for f in lint_findings(source, "TD104")] == [6]


def test_casts_of_the_prediction_or_in_a_branch_stay_quiet() -> None:
    source = """
        import torch.nn.functional as F

        def train(model, loader, soft):
            for x, y in loader:
                logits = model(x).float()
                if soft:
                    y = y.float()
                loss = F.cross_entropy(logits.float(), y)
                aux = F.cross_entropy(logits, y.to("cuda"))
        """
    assert lint_codes(source, "TD104") == []


def test_float_targets_for_other_losses_and_uncast_targets_stay_quiet() -> None:
    source = """
        from torch import nn

        def train(model, loader):
            bce, ce = nn.BCEWithLogitsLoss(), nn.CrossEntropyLoss()
            for x, y in loader:
                a = bce(model(x).squeeze(1), y.float())
                b = ce(model(x.float()), y)
                c = ce(model(x), y.long())
        """
    assert lint_codes(source, "TD104") == []


# --- TD105 legacy-tensor-constructor ---------------------------------------------------------


def test_legacy_shape_constructors_get_a_safe_empty_fix() -> None:
    source = """
        import torch

        counts = torch.Tensor(3, 4)
        noise = torch.cuda.FloatTensor(8)
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (4, Severity.WARNING),
        (5, Severity.WARNING),
    ]
    assert all(f.fix is not None and f.fix.applicability is Applicability.SAFE for f in found)
    assert "counts = torch.empty(3, 4)\n" in applied(source, found[0].fix)
    assert 'noise = torch.empty(8, dtype=torch.float32, device="cuda")' in applied(
        source, found[1].fix
    )
    assert "uninitialised" in found[0].message
    assert "without CUDA" in found[1].message


def test_legacy_shape_with_a_zero_sized_dimension_is_only_a_spelling() -> None:
    """``torch.FloatTensor(batch, beams, 0)`` holds no element (beam search grows it with
    ``torch.cat``): nothing uninitialised can be read, so info; a non-zero shape beside it
    stays a warning."""
    source = """
        import torch

        def beams(batch, size, vocab):
            done = torch.FloatTensor(batch, size, 0)
            scores = torch.LongTensor(batch, size, 0, vocab)
            state = torch.FloatTensor(batch, size)
            return done, scores, state.sum()
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (5, Severity.INFO),
        (6, Severity.INFO),
        (7, Severity.WARNING),
    ]
    assert "size 0" in found[0].message
    assert "torch.empty(batch, size, 0, dtype=torch.float32)" in applied(source, found[0].fix)


def test_legacy_data_constructors_are_info_and_keep_their_dtype() -> None:
    source = """
        import torch as T

        labels = T.LongTensor([1, 2, 3])
        weights = T.Tensor([0.5, 2.0])
        counts = T.Tensor([1, 2])
        """
    found = lint_findings(source, "TD105")
    assert [f.severity for f in found] == [Severity.INFO] * 3
    fixes = [f.fix for f in found]
    assert all(fix is not None for fix in fixes)
    assert "T.tensor([1, 2, 3], dtype=T.int64)" in applied(source, fixes[0])
    assert "T.tensor([0.5, 2.0])\n" in applied(source, fixes[1])
    assert fixes[1].applicability is Applicability.SAFE  # type: ignore[union-attr]
    assert "T.tensor([1, 2], dtype=T.float32)" in applied(source, fixes[2])
    assert fixes[2].applicability is Applicability.UNSAFE  # type: ignore[union-attr]


def test_cuda_legacy_constructors_follow_the_same_severity_as_cpu_ones() -> None:
    """``torch.cuda.FloatTensor([0.0])`` copies data and ``torch.cuda.FloatTensor(2)
    .normal_()`` fills at once: only the spelling is legacy (info), as for arguments of
    unknown kind on the CPU. An uninitialised shape stays a warning."""
    source = """
        import torch

        total = torch.cuda.FloatTensor([0.0])
        noise = torch.cuda.FloatTensor(2).normal_()
        buffer = torch.cuda.FloatTensor(8)
        unknown = torch.cuda.FloatTensor(sizes)
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (4, Severity.INFO),
        (5, Severity.INFO),
        (6, Severity.WARNING),
        (7, Severity.INFO),
    ]
    assert all("without CUDA" in f.message for f in found)


def test_a_shape_constructor_filled_element_by_element_in_a_loop_is_only_info() -> None:
    """``ids = torch.LongTensor(n)`` then a loop writing ``ids[i] = ...``: allocated by
    size to be filled (a tokenizer). A single element written leaves the rest
    uninitialised: still a warning."""
    source = """
        import torch

        def tokenize(words, vocab):
            ids = torch.LongTensor(len(words))
            position = 0
            with open("corpus.txt") as f:
                for word in words:
                    ids[position] = vocab[word]
                    position += 1
            head = torch.LongTensor(8)
            head[0] = 1
            return ids, head

        def read_edges(path, count):
            edges = torch.LongTensor(2, count)
            with open(path) as f:
                for index, line in enumerate(f):
                    source, target = line.split()
                    edges[0][index] = int(source)
                    edges[1][index] = int(target)
            return edges
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (5, Severity.INFO),
        (11, Severity.WARNING),
        (16, Severity.INFO),
    ]


def test_shape_constructor_filled_right_away_is_only_info() -> None:
    source = """
        import torch

        noise = torch.FloatTensor(8, 4).normal_(0, 0.1)
        ones = torch.DoubleTensor(1).fill_(1.0)
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (4, Severity.INFO),
        (5, Severity.INFO),
    ]
    assert "only the spelling is legacy" in found[0].message


def test_a_parameter_filled_in_the_same_expression_is_only_info() -> None:
    """Mammoth's mixture weights: ``nn.Parameter(torch.Tensor(1, k, 1)).fill_(1 / k)``."""
    source = """
        import torch

        class Mixture(torch.nn.Module):
            def __init__(self, k):
                super().__init__()
                self.pi = torch.nn.Parameter(torch.Tensor(1, k, 1), requires_grad=False).fill_(
                    1.0 / k
                )
                self.mu = torch.nn.Parameter(torch.Tensor(1, k, 1))

            def forward(self, x):
                return x * self.pi + self.mu
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (7, Severity.INFO),
        (10, Severity.WARNING),
    ]


def test_shape_constructor_initialised_by_the_next_statements_is_only_info() -> None:
    source = """
        import torch
        from torch import nn
        from torch.nn import init

        class GraphLayer(nn.Module):
            def __init__(self, n, m):
                super().__init__()
                self.kernel = nn.Parameter(torch.Tensor(n, m))
                nn.init.xavier_normal_(self.kernel)
                self.bias = nn.Parameter(torch.FloatTensor(m))
                self.scale = nn.Parameter(torch.Tensor(m))
                self.scale.data.uniform_(0.5, 1.5)
                self.reset_parameters()

            def reset_parameters(self):
                if self.bias is not None:
                    init.zeros_(self.bias)

        def buffer(n):
            out = torch.Tensor(n, 2)
            init.normal_(out)
            return out
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (9, Severity.INFO),
        (11, Severity.INFO),
        (12, Severity.INFO),
        (21, Severity.INFO),
    ]


def test_a_constructor_handed_straight_to_an_init_function_is_only_info() -> None:
    """Round 43's attention-transfer: ``kaiming_normal_(torch.Tensor(no, ni, k, k))``
    fills the memory where it is made; a function of another module is no initialiser."""
    source = """
        import torch
        from torch import nn
        from torch.nn.init import kaiming_normal_
        from mylib import kaiming_normal_ as other_init

        def conv_params(ni, no, k=1):
            return kaiming_normal_(torch.Tensor(no, ni, k, k))

        def linear_params(ni, no):
            return {"weight": nn.init.xavier_uniform_(torch.Tensor(no, ni))}

        def other(ni, no):
            return other_init(torch.Tensor(no, ni))
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (8, Severity.INFO),
        (11, Severity.INFO),
        (14, Severity.WARNING),
    ]


def test_a_parameter_initialised_through_a_conditional_expression_is_only_info() -> None:
    """Round 44's pytorch-GAT: the projection is a legacy-built parameter in one layer
    type and a Linear in the other, and ``init_params()`` (defined after ``__init__``)
    runs ``nn.init.xavier_uniform_(self.proj if fused else self.linear.weight)``. Round
    41's latent-depth logits, handed to a sampling helper in a conditional expression,
    stay uninitialised."""
    source = """
        import torch
        from torch import nn

        class Layer(nn.Module):
            def __init__(self, heads, n, m, fused):
                super().__init__()
                if fused:
                    self.proj = nn.Parameter(torch.Tensor(heads, n, m))
                else:
                    self.linear = nn.Linear(n, heads * m, bias=False)
                self.other = nn.Parameter(torch.Tensor(heads, m))
                self.init_params(fused)

            def init_params(self, fused):
                nn.init.xavier_uniform_(self.proj if fused else self.linear.weight)
                self.sample(self.other.detach() if fused else self.other)

            def sample(self, logits):
                return torch.sigmoid(logits)
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (9, Severity.INFO),
        (12, Severity.WARNING),
    ]


def test_a_name_rebound_to_its_own_filled_copy_is_only_info() -> None:
    """Round 41's Tacotron 2 (fairseq unit2speech): ``lat = torch.FloatTensor(b, d)``
    then ``lat = lat.to(device).zero_().type(...)``. A rebinding through a method that
    writes no value everywhere leaves the memory as it was."""
    source = """
        import torch

        def latents(inputs, dim):
            lat = torch.FloatTensor(len(inputs), dim)
            lat = lat.to(inputs.device).zero_().type(inputs.type())
            return lat

        def other(inputs, dim):
            lat = torch.FloatTensor(len(inputs), dim)
            lat = lat.to(inputs.device).abs_()
            return lat
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (5, Severity.INFO),
        (10, Severity.WARNING),
    ]


def test_shape_constructor_initialised_elsewhere_or_only_read_stays_a_warning() -> None:
    source = """
        import torch
        from torch import nn

        class Layer(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.weight = nn.Parameter(torch.Tensor(n, n))
                nn.init.xavier_normal_(self.other)

            def forward(self, x):
                return x @ self.weight

        def indices(batch, n):
            data = torch.LongTensor(batch, n) % n
            print(data)
            return data
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (8, Severity.WARNING),
        (15, Severity.WARNING),
    ]


def test_shape_constructors_written_by_their_holder_before_any_read_are_only_info() -> None:
    """Uninitialised memory is a bug only where it is read before it is written. A
    parameter filled by a method of its class (``reset_parameters()``, whatever calls
    it), a buffer registered then filled by ``normal_``, a tensor filled region by
    region through ``narrow(...).copy_()``, one handed to a helper or a collective
    that writes it, one allocated only to be deleted: info. One read as it is (a sum, a
    parameter no code of the class writes, a single element set) stays a warning."""
    source = """
        import torch
        import torch.distributed as dist
        from torch import nn
        from torch.nn import init

        class NoisyLinear(nn.Module):
            def __init__(self, n, m):
                super().__init__()
                self.weight = nn.Parameter(torch.FloatTensor(m, n))
                self.register_buffer("eps", torch.FloatTensor(m, n))
                self.bias = nn.Parameter(torch.Tensor(1, m))
                self.reset()

            def reset(self):
                init.kaiming_uniform_(self.weight)
                self.eps.normal_()

            def forward(self, x):
                return x @ (self.weight + self.eps).t() + self.bias

        def pad(img, before, after):
            out = torch.FloatTensor(before + after + img.size(0), 3)
            out.narrow(0, before, img.size(0)).copy_(img)
            out.narrow(0, 0, before).copy_(img[:before])
            return out

        def targets(batch, n, fill):
            loc = torch.Tensor(batch, n, 4)
            for i in range(batch):
                fill(loc, i)
            size = torch.LongTensor(2).cuda()
            dist.broadcast(size, 0)
            dist.all_reduce(torch.cuda.FloatTensor(1))
            reserved = torch.cuda.FloatTensor(256, 1024)
            del reserved
            head = torch.LongTensor(8)
            head[0] = 1
            return loc, size, head, torch.Tensor(batch, 2).sum()
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (10, Severity.INFO),
        (11, Severity.INFO),
        (12, Severity.WARNING),
        (23, Severity.INFO),
        (29, Severity.INFO),
        (32, Severity.INFO),
        (34, Severity.INFO),
        (35, Severity.INFO),
        (37, Severity.WARNING),
        (39, Severity.WARNING),
    ]
    assert "read before it is written" in found[0].message


def test_a_buffer_the_class_replaces_before_reading_is_only_info() -> None:
    """A non-persistent buffer registered with raw memory and replaced by a fresh tensor
    in another method (``self.embedding = ...`` in ``forward`` and ``train``) is written
    before it is read; one the class only reads stays a warning."""
    source = """
        import torch
        from torch import nn

        class Embedding(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.table = nn.Parameter(torch.randn(n, d))
                self.register_buffer("cache", torch.Tensor(n, d), persistent=False)
                self.register_buffer("stale", torch.Tensor(n, d), persistent=False)

            def train(self, mode=True):
                super().train(mode)
                if not mode:
                    self.cache = self.table * 2

            def forward(self, ids):
                if self.training:
                    self.cache = self.table * 2
                return self.cache[ids] + self.stale[ids]
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (9, Severity.INFO),
        (10, Severity.WARNING),
    ]


def test_a_shape_constructor_rebound_before_any_read_is_only_info() -> None:
    """A dead store (the name rebound to a helper's result on the next line) never reads
    the memory; one read first, or rebound only in a branch, stays a warning."""
    source = """
        import torch

        def table(pmf, lengths, helper):
            cdf = torch.Tensor(len(lengths), 8)
            cdf = helper(pmf, lengths)
            return cdf

        def scaled(pmf, lengths, helper):
            cdf = torch.Tensor(len(lengths), 8)
            total = cdf.sum()
            cdf = helper(pmf, lengths)
            return cdf, total

        def maybe(pmf, lengths, helper, flag):
            cdf = torch.Tensor(len(lengths), 8)
            if flag:
                cdf = helper(pmf, lengths)
            return cdf
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (5, Severity.INFO),
        (10, Severity.WARNING),
        (16, Severity.WARNING),
    ]


def test_memory_handed_to_a_module_that_resets_it_is_only_info() -> None:
    """``conv.weight = nn.Parameter(w)`` then ``conv.reset_parameters()`` (here under the
    flag set where the memory was made): the memory moved to a holder that is filled. A
    holder never filled, or the local read elsewhere too, stays a warning."""
    source = """
        import torch
        import torch.nn as nn

        def patch_first_conv(conv, in_channels):
            weight = conv.weight.detach()
            reset = False
            if in_channels == 1:
                weight = weight.sum(1, keepdim=True)
            else:
                reset = True
                weight = torch.Tensor(conv.out_channels, in_channels, *conv.kernel_size)
            conv.weight = nn.Parameter(weight)
            if reset:
                conv.reset_parameters()

        def never_filled(conv, in_channels):
            weight = torch.Tensor(conv.out_channels, in_channels, *conv.kernel_size)
            conv.weight = nn.Parameter(weight)

        def read_as_well(conv, in_channels):
            weight = torch.Tensor(conv.out_channels, in_channels, *conv.kernel_size)
            conv.weight = nn.Parameter(weight)
            conv.reset_parameters()
            return weight.norm()

        def another_module_reset(conv, other, in_channels):
            weight = torch.Tensor(conv.out_channels, in_channels, *conv.kernel_size)
            conv.weight = nn.Parameter(weight)
            other.reset_parameters()
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (12, Severity.INFO),
        (18, Severity.WARNING),
        (22, Severity.WARNING),
        (28, Severity.WARNING),
    ]


def test_the_shape_of_an_array_or_space_is_data_to_a_legacy_constructor() -> None:
    """``torch.Tensor(space.shape)``: a gym space's or NumPy array's shape is a tuple,
    which the constructor copies as data (``torch.Tensor((3,))`` is ``tensor([3.])``);
    only a tensor's ``torch.Size`` is read as a shape. Which one cannot be told: info."""
    source = """
        import torch

        def entropy_target(space):
            return -torch.prod(torch.Tensor(space.shape)).item()
        """
    [found] = lint_findings(source, "TD105")
    assert found.severity is Severity.INFO and found.fix is None


def test_ambiguous_arguments_are_reported_without_a_fix() -> None:
    source = """
        from torch import Tensor

        def build(values):
            return Tensor(values)
        """
    [found] = lint_findings(source, "TD105")
    assert found.severity is Severity.INFO and found.fix is None


def test_size_arguments_are_recognised_as_shapes() -> None:
    source = """
        import torch

        def like(x, items):
            a = torch.Tensor(x.size())
            b = torch.FloatTensor(len(items), 2)
            return a, b
        """
    found = lint_findings(source, "TD105")
    assert [f.severity for f in found] == [Severity.WARNING, Severity.WARNING]


def test_tensor_type_uses_that_are_not_calls_stay_quiet() -> None:
    source = """
        import torch

        class Scaled(torch.Tensor):
            pass

        def f(x: torch.Tensor) -> torch.Tensor:
            if isinstance(x, torch.Tensor):
                x = torch.Tensor.add(x, 1)
            return torch.Tensor._make_subclass(Scaled, x)
        """
    assert lint_codes(source, "TD105") == []


def test_a_local_class_named_tensor_is_not_torchs() -> None:
    source = """
        class Tensor:
            def __init__(self, n):
                self.n = n

        counts = Tensor(3)
        """
    assert lint_codes(source, "TD105") == []


def test_factory_functions_and_new_methods_stay_quiet() -> None:
    source = """
        import torch

        def build(x, n):
            a = torch.tensor([1.0, 2.0])
            b = torch.empty(n, 3).normal_()
            c = x.new_zeros(3)
            d = torch.as_tensor([1, 2], dtype=torch.float32)
            return a, b, c, d
        """
    assert lint_codes(source, "TD105") == []


# --- TD106 constant-tensor-moved-in-loop -----------------------------------------------------


def test_constant_built_and_moved_inside_the_loop_is_flagged() -> None:
    source = """
        import torch

        def train(model, loader, device):
            scale = torch.ones(10)
            for x, y in loader:
                w = torch.tensor([1.0, 3.0]).to(device)
                x = x.to(device) * scale.to(device)
                z = torch.zeros(4).cuda()
                m = torch.arange(10).to("cuda:0")
                model(x, w, z, m).backward()
        """
    found = lint_findings(source, "TD106")
    assert [f.location.line for f in found] == [7, 8, 9, 10]
    assert "built at line 5" in found[1].message
    assert "torch.tensor([1.0, 3.0], device=device)" in found[0].fix_hint
    assert all(f.severity is Severity.INFO for f in found)


def test_values_that_change_in_the_loop_stay_quiet() -> None:
    source = """
        import torch

        def train(model, loader, device, devices):
            for step, (x, labels) in enumerate(loader):
                y = torch.tensor(labels).to(device)
                t = torch.full((4,), step).to(device)
                for dev in devices:
                    copy = torch.ones(3).to(dev)
                r = torch.tensor(make_weights()).to(device)
                model(x, y, t, r).backward()
        """
    assert lint_codes(source, "TD106") == []


def test_dtype_changes_cpu_moves_and_moves_outside_loops_stay_quiet() -> None:
    source = """
        import torch

        def train(model, loader, device):
            weight = torch.tensor([1.0, 3.0]).to(device)
            mean = torch.tensor([0.5], device=device)
            for x, y in loader:
                half = torch.ones(3).to(torch.float16)
                back = torch.zeros(2).to("cpu")
                x = x.to(device)
                w = weight.to(device)
                model(x, w, half, back).backward()
        """
    assert lint_codes(source, "TD106") == []


def test_constants_in_loops_that_do_not_train_stay_quiet() -> None:
    source = """
        import torch
        import torch.distributed as dist

        def check_collectives(rank, ops):
            for op in ops:
                tensor = torch.tensor([True, True]).to(rank)
                dist.all_reduce(tensor, op=op)
        """
    assert lint_codes(source, "TD106") == []


def test_parameters_initialised_through_a_loop_over_them_are_only_info() -> None:
    """``nn.init`` on the variable of a loop over a list of parameters (literal, or a
    name bound to one), over ``self.parameters()``, or over their rows: every parameter
    is written before use."""
    source = """
        import torch
        from torch import nn

        class Attention(nn.Module):
            def __init__(self, n, k):
                super().__init__()
                self.w = nn.Parameter(torch.Tensor(n, k))
                self.h = nn.Parameter(torch.Tensor(k, 1))
                for tensor in [self.w, self.h]:
                    nn.init.xavier_normal_(tensor)

        class Interacting(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.q = nn.Parameter(torch.Tensor(n, n))
                self.k = nn.Parameter(torch.Tensor(n, n))
                for tensor in self.parameters():
                    nn.init.normal_(tensor, mean=0.0, std=0.05)

        class CrossMix(nn.Module):
            def __init__(self, layers, n, r):
                super().__init__()
                self.u = nn.Parameter(torch.Tensor(layers, n, r))
                self.v = nn.Parameter(torch.Tensor(layers, n, r))
                todo = (self.u, self.v)
                for para in todo:
                    for i in range(layers):
                        nn.init.xavier_normal_(para[i])
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (8, Severity.INFO),
        (9, Severity.INFO),
        (16, Severity.INFO),
        (17, Severity.INFO),
        (24, Severity.INFO),
        (25, Severity.INFO),
    ]


def test_a_helper_that_initialises_every_parameter_of_the_module_is_only_info() -> None:
    """DeepRobust's Q-networks: ``weights_init(self)`` at the end of ``__init__``, a
    function of the file defined below the class, loops over ``m.named_parameters()`` and
    hands each to a glorot fill. A helper given the module that only reads its
    parameters leaves them uninitialised."""
    source = """
        import torch
        from torch import nn
        from torch.nn.parameter import Parameter

        class QNet(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.w = Parameter(torch.Tensor(n, d))
                self.b = Parameter(torch.Tensor(d))
                weights_init(self)

            def forward(self, x):
                return x @ self.w + self.b

        class Probe(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.w = Parameter(torch.Tensor(n, n))
                count_parameters(self)

            def forward(self, x):
                return x @ self.w

        def _param_init(p):
            p.data.uniform_(-0.1, 0.1)

        def weights_init(m):
            for name, p in m.named_parameters():
                if "." not in name:
                    _param_init(p)

        def count_parameters(m):
            total = 0
            for name, p in m.named_parameters():
                print(name, p)
                total += p.numel()
            return total
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (9, Severity.INFO),
        (10, Severity.INFO),
        (19, Severity.WARNING),
    ]


def test_a_loop_over_other_parameters_does_not_initialise_this_one() -> None:
    source = """
        import torch
        from torch import nn

        class Attention(nn.Module):
            def __init__(self, n, k):
                super().__init__()
                self.w = nn.Parameter(torch.Tensor(n, k))
                self.b = nn.Parameter(torch.Tensor(k, 1))
                for tensor in [self.w]:
                    nn.init.xavier_normal_(tensor)

            def forward(self, x):
                return x @ self.w + self.b
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (8, Severity.INFO),
        (9, Severity.WARNING),
    ]


def test_parameters_of_a_submodule_its_owner_fills_through_self_parameters_are_info() -> None:
    """SR-GNN: the GNN cell declares ``Parameter(torch.Tensor(...))`` and its owner, which
    builds it, runs ``uniform_`` over all of ``self.parameters()``; a class nobody fills
    that way stays a warning."""
    source = """
        import torch
        from torch import nn

        class Cell(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.w = nn.Parameter(torch.Tensor(n, n))

            def forward(self, x):
                return x @ self.w

        class Loose(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.w = nn.Parameter(torch.Tensor(n, n))

            def forward(self, x):
                return x @ self.w

        class Model(nn.Module):
            def __init__(self, n):
                super().__init__()
                self._define()
                for weight in self.parameters():
                    weight.data.uniform_(-0.1, 0.1)
                self.loose = Loose(n)

            def _define(self):
                self.cell = Cell(4)
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (8, Severity.INFO),
        (16, Severity.WARNING),
    ]


def test_an_owner_filling_self_parameters_reaches_layers_its_blocks_build() -> None:
    """LibCity's ASTGCN: the model builds blocks that build the attention layers, then
    fills every parameter of ``self`` in ``_init_parameters()``: the layers two levels
    down are filled too. A layer no filled model builds stays a warning."""
    source = """
        import torch
        from torch import nn

        class Attention(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.w = nn.Parameter(torch.FloatTensor(n, n))

        class Unused(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.w = nn.Parameter(torch.FloatTensor(n, n))

            def forward(self, x):
                return x @ self.w

        class Block(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.attention = Attention(n)

        class Model(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.blocks = nn.ModuleList([Block(n) for _ in range(2)])
                self._init_parameters()

            def _init_parameters(self):
                for p in self.parameters():
                    if p.dim() > 1:
                        nn.init.xavier_uniform_(p)
                    else:
                        nn.init.uniform_(p)
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (8, Severity.INFO),
        (13, Severity.WARNING),
    ]


def test_an_owner_filling_self_parameters_in_a_method_called_after_building_is_info() -> None:
    """RecBole's SR-GNN: ``__init__`` builds the cell and then calls
    ``self._reset_parameters()``, whose loop fills every parameter of ``self``; a cell
    built only after that call is not reached by it and stays a warning."""
    source = """
        import torch
        from torch import nn

        class Cell(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.w = nn.Parameter(torch.Tensor(n, n))

        class Late(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.w = nn.Parameter(torch.Tensor(n, n))

            def forward(self, x):
                return x @ self.w

        class Model(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.cell = Cell(n)
                self._reset_parameters()
                self.late = Late(n)

            def _reset_parameters(self):
                for weight in self.parameters():
                    weight.data.uniform_(-0.1, 0.1)
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (8, Severity.INFO),
        (13, Severity.WARNING),
    ]


_LEGACY_PARAMETERS = """
import torch
from torch import nn

class Memory(nn.Module):
    def __init__(self, heads, dim):
        super().__init__()
        self.r_emb = nn.Parameter(torch.Tensor(heads, dim))

    def forward(self, x):
        return x + self.r_emb.sum()
"""


@pytest.mark.parametrize(
    "fill",
    [
        "init_weight(m.r_emb)",
        "nn.init.normal_(m.r_emb, 0.0, 0.02)",
        "m.r_emb.data.normal_(0.0, 0.02)",
    ],
)
def test_a_parameter_filled_by_name_from_another_file_is_only_info(tmp_path, fill) -> None:
    """``model.apply(weights_init)`` in the training script fills ``m.r_emb`` of every
    submodule that has one: the memory is written before the first forward."""
    from torchdoctor.static import LintConfig, lint

    (tmp_path / "model.py").write_text(_LEGACY_PARAMETERS, encoding="utf-8")
    [found] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD105")
    assert found.severity is Severity.WARNING
    (tmp_path / "train.py").write_text(
        "from torch import nn\nfrom model import Memory\n"
        "def init_weight(w):\n    nn.init.normal_(w, 0.0, 0.02)\n"
        "def weights_init(m):\n    if hasattr(m, 'r_emb'):\n"
        f"        {fill}\n"
        "model = Memory(4, 8)\nmodel.apply(weights_init)\n",
        encoding="utf-8",
    )
    [found] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD105")
    assert found.severity is Severity.INFO


@pytest.mark.parametrize(
    ("loop", "filled"),
    [
        # the Annotated Transformer's idiom, and FLAT's filtered xavier loop
        (
            "for p in model.parameters():\n    if p.dim() > 1:\n        nn.init.xavier_uniform_(p)",
            True,
        ),
        (
            "for n, p in model.named_parameters():\n"
            "    if 'embedding' not in n and 'bias' not in n and p.dim() > 1:\n"
            "        if args.init == 'uniform':\n            nn.init.xavier_uniform_(p)\n"
            "        else:\n            nn.init.xavier_normal_(p)",
            True,
        ),
        ("for p in model.parameters():\n    p.data.normal_(0.0, 0.02)", True),
        # the filter leaves the parameter out: by its name, or by its two dimensions
        (
            "for n, p in model.named_parameters():\n"
            "    if 'r_emb' not in n:\n        nn.init.normal_(p)",
            False,
        ),
        (
            "for n, p in model.named_parameters():\n"
            "    if 'weight' in n:\n        nn.init.normal_(p)",
            False,
        ),
        ("for p in model.parameters():\n    if p.dim() == 1:\n        nn.init.zeros_(p)", False),
        # not an initialiser: freezing, or copying another model's values
        ("for p in model.parameters():\n    p.requires_grad = False", False),
        ("for p in ema.parameters():\n    p.data.copy_(p.data * 0.9)", False),
    ],
)
def test_a_parameter_filled_by_a_whole_model_init_loop_is_only_info(
    tmp_path, loop: str, filled: bool
) -> None:
    """``for name, p in model.named_parameters(): ... nn.init.xavier_uniform_(p)`` in the
    training script fills every parameter its filter lets through before any forward."""
    from torchdoctor.static import LintConfig, lint

    (tmp_path / "model.py").write_text(_LEGACY_PARAMETERS, encoding="utf-8")
    (tmp_path / "train.py").write_text(
        "import argparse\nfrom torch import nn\nfrom model import Memory\n"
        "args = argparse.ArgumentParser().parse_args()\n"
        f"model = Memory(4, 8)\nema = Memory(4, 8)\n{loop}\n",
        encoding="utf-8",
    )
    [found] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD105")
    assert found.severity is (Severity.INFO if filled else Severity.WARNING)


def test_another_attribute_filled_or_a_comment_does_not_initialise(tmp_path) -> None:
    from torchdoctor.static import LintConfig, lint

    (tmp_path / "model.py").write_text(_LEGACY_PARAMETERS, encoding="utf-8")
    (tmp_path / "train.py").write_text(
        "from torch import nn\n# init_weight(m.r_emb) is not needed\n"
        "def weights_init(m):\n    nn.init.normal_(m.r_emb_scale)\n",
        encoding="utf-8",
    )
    [found] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD105")
    assert found.severity is Severity.WARNING


_FILLS_BY_NAME = """
from torch import nn

def init_weight(module, conv_init):
    for m in module.modules():
        if isinstance(m, {cls}):
            conv_init(m.weight_a)
"""

_SPLIT_WEIGHTS = """
import torch
from torch import nn
from torch.nn import Parameter

class SplitConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.weight_a = Parameter(torch.Tensor(cout, cin))

    def forward(self, x):
        return x @ self.weight_a.t()
"""


def _td105_severities(root) -> list[Severity]:
    from torchdoctor.static import LintConfig, lint

    return [f.severity for f in lint(root, config=LintConfig(), jobs=1).by_code("TD105")]


def _split_project(tmp_path, importer: str, fills: str = "SplitConv") -> None:
    """``lib/ops/conv.py`` defines the class; ``lib/helpers/init_func.py``, a sibling
    folder off the class's folder line, imports it with ``importer`` and fills it."""
    for package in ("lib", "lib/ops", "lib/helpers"):
        (tmp_path / package).mkdir(exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "lib/ops/conv.py").write_text(_SPLIT_WEIGHTS, encoding="utf-8")
    (tmp_path / "lib/helpers/init_func.py").write_text(
        importer + _FILLS_BY_NAME.format(cls=fills), encoding="utf-8"
    )


@pytest.mark.parametrize(
    "importer",
    [
        "from ops.conv import SplitConv\n",  # `lib` on sys.path (TorchSemiSeg's furnace)
        "from lib.ops.conv import SplitConv\n",
        "import ops.conv\nSplitConv = ops.conv.SplitConv\n",
    ],
)
def test_a_parameter_filled_by_name_in_a_module_importing_the_class_is_only_info(
    tmp_path, importer
) -> None:
    """TorchSemiSeg's ``Conv2_5D_disp``: ``weight_0 = Parameter(torch.Tensor(...))`` in
    ``seg_opr/conv_2_5d.py``, filled by ``conv_init(m.weight_0)`` in
    ``utils/init_func.py``, a sibling folder that imports the class to dispatch on it."""
    _split_project(tmp_path, importer)
    assert _td105_severities(tmp_path) == [Severity.INFO]


def test_a_parameter_filled_through_a_package_re_export_is_only_info(tmp_path) -> None:
    _split_project(tmp_path, "from ops import SplitConv\n")
    (tmp_path / "lib/ops/__init__.py").write_text("from .conv import SplitConv\n", encoding="utf-8")
    assert _td105_severities(tmp_path) == [Severity.INFO]


def test_a_fill_in_a_sibling_folder_that_does_not_import_the_class_stays_a_warning(
    tmp_path,
) -> None:
    """The same fill in a module that imports something else of the project (or
    nothing) says nothing about this class: it may fill another class's ``weight_a``."""
    _split_project(tmp_path, "from ops.other import Other as SplitConv\n")
    (tmp_path / "lib/ops/other.py").write_text("class Other:\n    pass\n", encoding="utf-8")
    assert _td105_severities(tmp_path) == [Severity.WARNING]
    _split_project(tmp_path, "import ops\nSplitConv = ops.SplitConv\n")
    assert _td105_severities(tmp_path) == [Severity.WARNING]


def test_a_parameter_an_importer_never_fills_stays_a_warning(tmp_path) -> None:
    _split_project(tmp_path, "from ops.conv import SplitConv\n")
    (tmp_path / "lib/helpers/init_func.py").write_text(
        "from ops.conv import SplitConv\nmodel = SplitConv(3, 4)\n", encoding="utf-8"
    )
    assert _td105_severities(tmp_path) == [Severity.WARNING]


def test_an_importer_of_another_examples_module_of_the_same_name_does_not_fill(
    tmp_path,
) -> None:
    """Two example folders with a ``model.py`` each: ``b/train.py``'s ``from model import``
    reaches ``b/model.py``, so its fill leaves ``a/model.py``'s parameter a warning."""
    for example in ("a", "b"):
        (tmp_path / example).mkdir()
        (tmp_path / example / "model.py").write_text(_SPLIT_WEIGHTS, encoding="utf-8")
    (tmp_path / "b/train.py").write_text(
        "from model import SplitConv\n" + _FILLS_BY_NAME.format(cls="SplitConv"),
        encoding="utf-8",
    )
    from torchdoctor.static import LintConfig, lint

    found = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD105")
    assert sorted((f.location.path.split("/")[-2], f.severity.name) for f in found) == [
        ("a", "WARNING"),
        ("b", "INFO"),
    ]


def test_parameters_of_a_dict_or_list_filled_by_a_loop_over_it_are_only_info() -> None:
    """OGB's R-GCN: a ParameterDict of ``Parameter(torch.Tensor(...))`` built by a dict
    comprehension, filled by ``reset_parameters()`` looping over ``self.embs.values()``;
    the same with a ParameterList. One the class never fills stays a warning."""
    source = """
        import torch
        from torch.nn import Module, Parameter, ParameterDict, ParameterList

        class RGCN(Module):
            def __init__(self, sizes, dim):
                super().__init__()
                self.embs = ParameterDict(
                    {key: Parameter(torch.Tensor(n, dim)) for key, n in sizes.items()}
                )
                self.bases = ParameterList([Parameter(torch.Tensor(dim, dim)) for _ in sizes])
                self.loose = ParameterList([Parameter(torch.Tensor(dim, 2)) for _ in sizes])
                self.reset_parameters()

            def reset_parameters(self):
                for emb in self.embs.values():
                    torch.nn.init.xavier_uniform_(emb)
                for base in self.bases:
                    torch.nn.init.orthogonal_(base)

            def forward(self, x):
                return x + sum(e.sum() for e in self.embs.values()) + self.loose[0].sum()
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (9, Severity.INFO),
        (11, Severity.INFO),
        (12, Severity.WARNING),
    ]


def test_td105_a_helper_passing_its_callers_arguments_on_is_information() -> None:
    # Round 34 (rlkit): `def FloatTensor(*args)` forwards whatever its callers give, data
    # or a shape. A vararg named for a shape (`*size`) still reads as one.
    found = lint_findings(
        """
        import torch

        def float_tensor(*args, **kwargs):
            return torch.FloatTensor(*args, **kwargs)

        def uninitialised(*size):
            return torch.FloatTensor(*size)
        """,
        "TD105",
    )
    assert [(f.location.line, f.severity) for f in found] == [
        (5, Severity.INFO),
        (8, Severity.WARNING),
    ]
    assert "is a legacy constructor" in found[0].message
    assert "reads its arguments as a shape" in found[1].message


def test_td105_an_optional_parameter_filled_by_the_loop_after_it_is_information() -> None:
    """rtdl's tokenizers: ``self.bias = nn.Parameter(Tensor(n, d)) if bias else None``,
    then a loop over ``[self.weight, self.bias]`` initialises each that exists."""
    source = """
        import torch
        from torch import Tensor, nn

        class Tokenizer(nn.Module):
            def __init__(self, n, d, bias, init):
                super().__init__()
                self.weight = nn.Parameter(Tensor(n, d))
                self.bias = nn.Parameter(Tensor(n, d)) if bias else None
                for parameter in [self.weight, self.bias]:
                    if parameter is not None:
                        init.apply(parameter, d)

            def forward(self, x):
                return x * self.weight
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (8, Severity.INFO),
        (9, Severity.INFO),
    ]


def test_td105_a_weight_built_in_one_branch_and_filled_is_information() -> None:
    """AllenNLP's Embedding: other branches wrap other values as ``self.weight``; the
    branch that allocates a FloatTensor fills it with ``xavier_uniform_`` at once."""
    source = """
        import torch

        class Embedding(torch.nn.Module):
            def __init__(self, n, d, weight=None, pretrained=None):
                super().__init__()
                if pretrained is not None:
                    weight = torch.load(pretrained)
                    self.weight = torch.nn.Parameter(weight)
                elif weight is not None:
                    self.weight = torch.nn.Parameter(weight)
                else:
                    weight = torch.FloatTensor(n, d)
                    self.weight = torch.nn.Parameter(weight)
                    torch.nn.init.xavier_uniform_(self.weight)
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [(13, Severity.INFO)]


@pytest.mark.parametrize(
    "base, initialiser, severity",
    [
        # InternImage's DinoTransformer: mmdet's DeformableDetrTransformer.init_weights
        # draws normal_(self.level_embeds); the subclass calls it through super().
        ("DeformableDetrTransformer", "super().init_weights()", Severity.INFO),
        ("DeformableDetrTransformer", "super(Dino, self).reset_parameters()", Severity.INFO),
        # torch's Module initialises nothing of a subclass's own
        ("nn.Module", "super().init_weights()", Severity.WARNING),
        # a base of the same file is read: it fills nothing here
        ("LocalBase", "super().init_weights()", Severity.WARNING),
        # no initialiser of the base is called
        ("DeformableDetrTransformer", "super().forward()", Severity.WARNING),
    ],
)
def test_td105_a_parameter_the_unread_base_initialises_is_information(
    base: str, initialiser: str, severity: Severity
) -> None:
    source = f"""
        import torch
        from torch import nn
        from mmdet.models.utils.transformer import DeformableDetrTransformer

        class LocalBase(nn.Module):
            def init_weights(self):
                pass

        class Dino({base}):
            def init_layers(self):
                self.level_embeds = nn.Parameter(torch.Tensor(4, 256))

            def init_weights(self):
                {initialiser}
                nn.init.normal_(self.query_embed.weight)

            def forward(self, x):
                return x + self.level_embeds.sum()
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [(12, severity)]


ONE_HOT_DISCRIMINATOR = """
import torch
from torch import nn

class Server:
    def train_discriminator(self):
        loss_func = nn.CrossEntropyLoss()
        for x, y in self.feature_dataloader:
            y = y.type(torch.float32)
            loss = loss_func(self.discriminator(x), y)
            loss.backward()

    def test_discriminator(self):
        correct = 0
        for x, y in self.feature_dataloader:
            pred = self.discriminator(x).argmax(dim=1)
            {reduce}
            correct += (pred == y).sum().item()
        return correct
"""


@pytest.mark.parametrize(
    ("reduce", "flagged"),
    [
        # FL-bench's AdCol: the same loader's targets are one-hot rows (argmax in the test)
        ("y = torch.argmax(y, dim=1)", False),
        ("y = y.argmax(1)", False),
        # targets compared as they are: class indices
        ("pass", True),
    ],
)
def test_td104_targets_the_file_reads_as_one_hot_are_soft(reduce: str, flagged: bool) -> None:
    found = lint_codes(ONE_HOT_DISCRIMINATOR.format(reduce=reduce), "TD104")
    assert [code for code, _ in found] == (["TD104"] if flagged else [])


@pytest.mark.parametrize(
    ("use", "severity"),
    [
        # SSLRec's multi-behaviour models: `self.ii_w` is built and never read again
        ("h @ self.i_w", Severity.INFO),
        # read by the forward: its garbage reaches every output
        ("h @ self.i_w @ self.ii_w", Severity.WARNING),
        # read by name through getattr
        ('h @ self.i_w @ getattr(self, "ii_w")', Severity.WARNING),
        # updated in place is a read too
        ("h @ self.i_w + self.ii_w.sum()", Severity.WARNING),
    ],
)
def test_td105_a_parameter_no_line_reads_is_information(use: str, severity: Severity) -> None:
    source = f"""
        import torch
        from torch import nn

        class Gating(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.i_w = nn.Parameter(torch.Tensor(d, d))
                self.ii_w = nn.Parameter(torch.Tensor(d, d))
                nn.init.xavier_uniform_(self.i_w)

            def forward(self, h):
                return {use}
        """
    found = [f for f in lint_findings(source, "TD105") if f.location.line == 9]
    assert [f.severity for f in found] == [severity]


@pytest.mark.parametrize(
    ("source", "severity"),
    [
        # hedwig's unknown-word cache: the entry is filled on the next line
        (
            "cache = {}\ndef unk(size):\n    cache[size] = torch.Tensor(size)\n"
            "    cache[size].uniform_(-0.25, 0.25)\n    return cache[size]\n",
            Severity.INFO,
        ),
        # FFNO: the memory is wrapped as a Parameter, and the Parameter is filled
        (
            "def make(n):\n    weight = torch.FloatTensor(n, n)\n"
            "    param = torch.nn.Parameter(weight)\n    torch.nn.init.xavier_normal_(param)\n"
            "    return param\n",
            Severity.INFO,
        ),
        # MaskGCT: only the tensor's device is read, then the name is bound again
        (
            "def sample(n, mask):\n    xt = torch.LongTensor(n, 4).to(mask.device)\n"
            "    token = torch.zeros(n, device=xt.device)\n    xt = token.long()\n"
            "    return xt\n",
            Severity.INFO,
        ),
        # the alias never filled, the values returned
        (
            "def make(n):\n    weight = torch.FloatTensor(n, n)\n"
            "    param = torch.nn.Parameter(weight)\n    return param\n",
            Severity.WARNING,
        ),
        (
            "def sample(n, mask):\n    xt = torch.LongTensor(n, 4).to(mask.device)\n"
            "    return xt.device, xt\n",
            Severity.WARNING,
        ),
    ],
)
def test_td105_memory_filled_through_an_alias_or_never_read_for_values(
    source: str, severity: Severity
) -> None:
    (found,) = lint_findings("import torch\n" + source, "TD105")
    assert found.severity is severity


def test_td105_lightnings_example_input_array_is_information() -> None:
    """kraken: ``self.example_input_array = torch.Tensor(1, c, h, w)`` is traced by
    Lightning for the model summary; its values never matter. Another attribute the
    forward reads stays a warning."""
    source = """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self, c, h, w):
                super().__init__()
                self.example_input_array = torch.Tensor(1, c, h, w)
                self.offset = nn.Parameter(torch.Tensor(c, 2))

            def forward(self, x):
                return x + self.offset

            def summarize(self):
                return self.example_input_array.sum()
        """
    found = {f.location.line: f.severity for f in lint_findings(source, "TD105")}
    assert found == {8: Severity.INFO, 9: Severity.WARNING}


def test_a_parameter_given_as_data_keyword_and_filled_after_the_branch_is_info() -> None:
    """DenseMatchingBenchmark's cost-volume norm: ``nn.Parameter(data=torch.Tensor(1),
    requires_grad=...)`` in both arms of an ``if``, then ``self.weight.data.fill_(w)``
    after it. Passed by keyword, the memory is still the parameter's, and the fill
    reaches it; a parameter nothing fills and forward reads stays a warning."""
    source = """
        import torch
        from torch import nn

        class Norm(nn.Module):
            def __init__(self, affine=True, weight=1.0):
                super().__init__()
                if affine:
                    self.weight = nn.Parameter(data=torch.Tensor(1), requires_grad=True)
                else:
                    self.weight = nn.Parameter(data=torch.Tensor(1), requires_grad=False)
                self.weight.data.fill_(weight)
                self.shift = nn.Parameter(data=torch.Tensor(1))

            def forward(self, x):
                return x * self.weight + self.shift
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (9, Severity.INFO),
        (11, Severity.INFO),
        (13, Severity.WARNING),
    ]


def test_an_entry_written_into_a_state_dict_the_caller_handed_in_is_info() -> None:
    """fairseq-style ``upgrade_state_dict_named(self, state_dict, name)`` writes
    ``state_dict[f"{name}._float_tensor"] = torch.FloatTensor(1)``: the memory goes back
    to the caller (which loads it into a buffer read only for its dtype and device). An
    entry the function reads back, or a dict of its own, stays a warning."""
    source = """
        import torch

        def upgrade_state_dict_named(state_dict, name):
            state_dict[f"{name}.embed_positions._float_tensor"] = torch.FloatTensor(1)

        def scale(state_dict, name):
            state_dict[name + ".scale"] = torch.FloatTensor(1)
            return state_dict[name + ".scale"] * 2

        def local(name):
            cache = {}
            cache[name] = torch.FloatTensor(1)
            return cache[name] + 1
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (5, Severity.INFO),
        (8, Severity.WARNING),
        (13, Severity.WARNING),
    ]


def test_a_recurrent_cell_reset_by_the_inherited_reset_is_info() -> None:
    """PyPOTS' peephole cell: a subclass of ``nn.LSTMCell`` adds its own weights and then
    calls ``self.reset_parameters()``, which it does not define: torch's recurrent reset
    draws every parameter of the module, the new ones included. A subclass of a layer
    whose reset fills only its own weights (``nn.Linear``), or one that overrides the
    reset further down the class, is judged by that reset instead."""
    source = """
        import torch
        from torch import nn
        from torch.nn import Parameter

        class PeepholeCell(nn.LSTMCell):
            def __init__(self, size, hidden):
                super().__init__(size, hidden)
                self.weight_ch = Parameter(torch.Tensor(3 * hidden, hidden))
                self.reset_parameters()

            def forward(self, x, state):
                return state[1] @ self.weight_ch.t()

        class GatedGRU(nn.GRU):
            def __init__(self, size, hidden):
                super().__init__(size, hidden)
                self.gate = Parameter(torch.Tensor(hidden, 1))
                super().reset_parameters()

            def forward(self, x):
                return super().forward(x)[0] @ self.gate

        class Scaled(nn.Linear):
            def __init__(self, size):
                super().__init__(size, size)
                self.scale = Parameter(torch.Tensor(size, 1))
                self.reset_parameters()

            def forward(self, x):
                return super().forward(x) @ self.scale

        class OwnReset(nn.RNNCell):
            def __init__(self, size, hidden):
                super().__init__(size, hidden)
                self.alpha = Parameter(torch.Tensor(hidden, 1))
                self.reset_parameters()

            def reset_parameters(self):
                nn.init.uniform_(self.weight_ih)

            def forward(self, x, h):
                return super().forward(x, h) @ self.alpha
        """
    found = lint_findings(source, "TD105")
    assert [(f.location.line, f.severity) for f in found] == [
        (9, Severity.INFO),
        (18, Severity.INFO),
        (27, Severity.WARNING),
        (36, Severity.WARNING),
    ]


_INHERITED_RESET = """
import torch
from torch import nn


class Template(nn.Module):
    def __init__(self, degree):
        super().__init__()
        self.degree = degree

    def reset_parameters(self):
        {reset}


class Layer(Template):
    def __init__(self, n, degree):
        super().__init__(degree)
        self.coeffs = nn.Parameter(torch.Tensor(n, degree))
        self.reset_parameters()

    def forward(self, x):
        return x @ self.coeffs
"""


@pytest.mark.parametrize(
    ("reset", "flagged"),
    [
        # torchdyn's Galerkin layers: the base class's reset zero-fills the parameter
        ("nn.init.zeros_(self.coeffs)", False),
        ("self.coeffs.data.uniform_(-0.1, 0.1)", False),
        # the inherited reset fills something else: the parameter stays garbage
        ("pass", True),
    ],
)
def test_td105_a_reset_inherited_from_a_base_class_of_the_file_initialises(
    reset: str, flagged: bool
) -> None:
    source = _INHERITED_RESET.format(reset=reset)
    found = lint_findings(source, "TD105")
    assert len(found) == 1  # the legacy constructor is always named
    # filled right after: information; left as it is: a warning
    assert (found[0].severity >= Severity.WARNING) is flagged, found[0].message


_HELD_IN_A_PLAIN_LIST = """
import torch
from torch import nn


class Units(nn.Module):
    def __init__(self, classes, dim):
        super().__init__()
        self.label_embs = nn.Parameter(torch.FloatTensor(classes, dim))
        {holder}
        for p in {loop}:
            nn.init.uniform_(p)

    def forward(self, x):
        return x @ self.label_embs.t()
"""


@pytest.mark.parametrize(
    ("holder", "loop", "severity"),
    [
        # SpeechUT: the parameter sits in a plain list attribute a loop then fills
        ("self.label_embs_list = [self.label_embs]", "self.label_embs_list", Severity.INFO),
        ("embs = [self.label_embs]", "embs", Severity.INFO),
        # the list holds something else, or is bound twice: not shown filled
        ("self.others = [nn.Parameter(torch.zeros(3))]", "self.others", Severity.WARNING),
        (
            "self.label_embs_list = [self.label_embs]\n        self.label_embs_list = []",
            "self.label_embs_list",
            Severity.WARNING,
        ),
    ],
)
def test_a_parameter_filled_through_a_plain_list_attribute(
    holder: str, loop: str, severity: Severity
) -> None:
    source = _HELD_IN_A_PLAIN_LIST.format(holder=holder, loop=loop)
    assert [f.severity for f in lint_findings(source, "TD105")] == [severity]
