"""TD102 float64-in-training: judged by where the float64 value goes, not by its name.

The first TD102 tests (models, data, metric accumulators, no_grad, tests, comparisons) are
in ``test_device.py``, where the rule used to live; these cover the data flow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LAB
from tests.unit.static.helpers import assert_marked, lint_findings
from torchdoctor.findings import Severity

# --- flagged: the value reaches a model, a loss, a parameter or an optimizer ---------------


def test_a_statistic_looking_name_does_not_hide_model_input() -> None:
    assert_marked(
        """
    import torch
    def main(model, data, optimizer):
        stats = torch.tensor(data, dtype=torch.float64)  # expect: TD102
        out = model(stats)
        out.sum().backward()
        optimizer.step()
    """,
        "TD102",
    )


def test_the_message_says_where_the_value_goes() -> None:
    (found,) = lint_findings(
        """
    import torch
    def main(model, data, optimizer):
        total = torch.tensor(data, dtype=torch.float64)
        model(total).sum().backward()
        optimizer.step()
    """,
        "TD102",
    )
    assert "reaches `model(...)` at line 5" in found.message
    assert found.evidence["reaches"] == "training"


def test_value_passed_to_a_helper_that_calls_the_model() -> None:
    assert_marked(
        """
    import torch
    def forward_pass(net, batch):
        return net(batch)
    def main(model, data, optimizer):
        values = torch.as_tensor(data, dtype=torch.float64)  # expect: TD102
        forward_pass(model, values).sum().backward()
        optimizer.step()
    """,
        "TD102",
    )


def test_value_returned_into_a_dataset_loader_and_batches() -> None:
    assert_marked(
        """
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    def load():
        arr = np.load("x.npy")
        return torch.tensor(arr, dtype=torch.float64)  # expect: TD102
    def main(model, optimizer):
        features = load()
        loader = DataLoader(TensorDataset(features), batch_size=4)
        for (xb,) in loader:
            model(xb).sum().backward()
            optimizer.step()
    """,
        "TD102",
    )


def test_value_into_a_loss_or_a_parameter() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(3, dtype=torch.float64))  # expect: TD102
    def main(model, x, target, optimizer):
        loss = nn.functional.mse_loss(model(x), target.double())  # expect: TD102
        loss.backward()
        optimizer.step()
    """,
        "TD102",
    )


def test_value_into_an_optimizer_and_a_called_model() -> None:
    assert_marked(
        """
    import torch
    def main(make_model, x):
        weights = torch.zeros(3, requires_grad=True, dtype=torch.float64)  # expect: TD102
        optimizer = torch.optim.SGD([weights], lr=0.1)
        net = make_model().double()  # expect: TD102
        net(x).sum().backward()
        optimizer.step()
    """,
        "TD102",
    )


# --- quiet: summaries of the training, whatever they are called ----------------------------


TRAIN = """
import torch
def main(model, loader, optimizer, criterion):
    history = []
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        history.append(loss.item())
"""


@pytest.mark.parametrize(
    "summary",
    [
        # the clean corpus's zero_grad_at_end.py
        "last = torch.tensor(history[-20:], dtype=torch.float64)\n"
        "print(f'loss {last.mean().item():.4f} +- {last.std().item():.4f}')",
        "print(torch.tensor(history, dtype=torch.float64).std())",
        "spread = torch.tensor(history).double().std().item()",
        "logger.info('loss %s', torch.tensor(history, dtype=torch.float64).mean())",
        "summary = {'mean': torch.tensor(history, dtype=torch.float64).mean()}\nprint(summary)",
        "curve = torch.tensor(history, dtype=torch.float64)\n"
        "if curve[-1] > curve[0]:\n    print('diverged')",
        "curve = torch.tensor(history, dtype=torch.float64)\nreturn float(curve.min())",
        "window = []\nwindow.append(torch.tensor(history, dtype=torch.float64).mean())\n"
        "print(window)",
        "writer.add_scalar('loss/std', torch.tensor(history, dtype=torch.float64).std(), 0)",
    ],
)
def test_summaries_after_training_stay_quiet(summary: str) -> None:
    body = "\n".join("    " + line for line in summary.splitlines())
    assert_marked(TRAIN + body + "\n", "TD102")


def test_accumulators_and_confusion_matrices_stay_quiet() -> None:
    assert_marked(
        """
    import torch
    def main(model, loader, optimizer, num_classes):
        confusion = torch.zeros(num_classes, num_classes, dtype=torch.float64)
        seen = torch.zeros(num_classes, dtype=torch.float64)
        for x, y in loader:
            out = model(x)
            out.sum().backward()
            optimizer.step()
            confusion[y, out.argmax(1)] += 1
            seen += torch.bincount(y, minlength=num_classes).double()
        print(confusion / seen)
    """,
        "TD102",
    )


def test_summary_computed_by_a_helper_stays_quiet() -> None:
    assert_marked(
        """
    import torch
    def spread(values):
        return torch.tensor(values, dtype=torch.float64).std()
    def main(model, loader, optimizer):
        losses = []
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"spread {spread(losses).item():.3f}")
    """,
        "TD102",
    )


def test_precise_ema_copied_back_into_float32_stays_quiet() -> None:
    assert_marked(
        """
    import torch
    def main(model, loader, optimizer, decay=0.999):
        shadow = [p.detach().double() for p in model.parameters()]
        for x, y in loader:
            model(x).sum().backward()
            optimizer.step()
        for s, p in zip(shadow, model.parameters()):
            p.data.copy_(s)
    """,
        "TD102",
    )


def test_a_float64_model_is_one_finding_not_one_per_input_it_is_fed() -> None:
    # Hidden states built in float64 inside forward follow from the model's conversion.
    assert_marked(
        """
    import torch
    from torch import nn
    class Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.LSTMCell(1, 8)
        def forward(self, x):
            h = torch.zeros(x.size(0), 8, dtype=torch.double)
            c = torch.zeros(x.size(0), 8, dtype=torch.double)
            return self.cell(x, (h, c))
    def main(x, y):
        seq = Seq()
        seq.double()  # expect: TD102
        optimizer = torch.optim.LBFGS(seq.parameters())
        loss = nn.functional.mse_loss(seq(x)[0], y)
        loss.backward()
        optimizer.step()
    """,
        "TD102",
    )


def test_float64_inputs_of_a_float32_model_are_each_reported() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    class Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.LSTMCell(1, 8)
        def forward(self, x):
            h = torch.zeros(x.size(0), 8, dtype=torch.double)  # expect: TD102
            return self.cell(x, (h, h))
    def main(x, y, optimizer):
        loss = nn.functional.mse_loss(Seq()(x)[0], y)
        loss.backward()
        optimizer.step()
    """,
        "TD102",
    )


def test_a_float64_model_fed_data_built_in_float64_on_purpose_is_information() -> None:
    source = """
    import torch
    from torch import nn
    def main():
        t = torch.arange(0, 40, dtype=torch.float64) / 4
        model = nn.Linear(1, 1).double()
        optimizer = torch.optim.LBFGS(model.parameters())
        def closure():
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(t[:, None]), t[:, None].sin())
            loss.backward()
            return loss
        optimizer.step(closure)
    """
    found = lint_findings(source, "TD102")
    assert [(f.location.line, f.severity) for f in found] == [(6, Severity.INFO)]
    assert "on purpose" in found[0].message


# --- judged where the value is used: cast to float32 first, or only under no_grad --------


def test_float64_schedule_cast_to_float32_before_register_buffer_is_quiet() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    class Diffusion(nn.Module):
        def __init__(self, steps):
            super().__init__()
            betas = torch.linspace(1e-4, 0.02, steps, dtype=torch.float64)
            alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
            self.register_buffer("betas", betas.to(torch.float32))
            self.register_buffer("sqrt_ac", alphas_cumprod.sqrt().float())
            self.register_buffer("ac", torch.tensor(alphas_cumprod, dtype=torch.float32))
            self.net = nn.Linear(4, 4)
        def forward(self, x):
            return self.net(x) * self.sqrt_ac[0]
    def train(model, x, optimizer):
        model(x).sum().backward()
        optimizer.step()
    """,
        "TD102",
    )


def test_float64_schedule_registered_through_a_casting_lambda_is_quiet() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    def cosine_schedule(steps):
        t = torch.linspace(0, steps, steps + 1, dtype=torch.float64) / steps
        f = torch.cos(t) ** 2
        return torch.clip(1 - f[1:] / f[:-1], 0, 0.999)
    class Diffusion(nn.Module):
        def __init__(self, steps):
            super().__init__()
            betas = cosine_schedule(steps)
            to_buffer = lambda name, val: self.register_buffer(name, val.to(torch.float32))
            to_buffer("betas", betas)
            to_buffer("alphas", 1.0 - betas)
            self.net = nn.Linear(4, 4)
    def train(model, x, optimizer):
        model(x).sum().backward()
        optimizer.step()
    """,
        "TD102",
    )


def test_float64_schedule_registered_as_is_is_still_flagged() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    class Diffusion(nn.Module):
        def __init__(self, steps):
            super().__init__()
            betas = torch.linspace(1e-4, 0.02, steps, dtype=torch.float64)  # expect: TD102
            keep = lambda name, val: self.register_buffer(name, val)
            keep("betas", betas)
            self.net = nn.Linear(4, 4)
    def train(model, x, optimizer):
        model(x).sum().backward()
        optimizer.step()
    """,
        "TD102",
    )


def test_float64_step_reached_only_from_a_no_grad_sampler_is_quiet() -> None:
    assert_marked(
        """
    import torch
    class Sampler:
        def __init__(self, model):
            self.model = model
        def step(self, x, t):
            sigma = torch.tensor(t, dtype=torch.float64)
            return x - self.model(x) * sigma
        @torch.no_grad()
        def sample(self, x):
            for t in range(10):
                x = self.step(x, t / 10)
            return x
    def train(model, x, optimizer):
        model(x).sum().backward()
        optimizer.step()
        return Sampler(model).sample(x)
    """,
        "TD102",
    )


def test_float64_step_also_called_while_training_is_flagged() -> None:
    assert_marked(
        """
    import torch
    def step(model, x, t):
        sigma = torch.tensor(t, dtype=torch.float64)  # expect: TD102
        return x - model(x) * sigma
    @torch.no_grad()
    def sample(model, x):
        return step(model, x, 0.5)
    def train(model, x, optimizer):
        step(model, x, 0.1).sum().backward()
        optimizer.step()
    """,
        "TD102",
    )


# --- a schedule function picked at run time, and a float64 step cast back ------------------


@pytest.mark.parametrize(
    "pick",
    [
        # if/elif into a variable
        """if kind == "linear":
                fn = linear_schedule
            elif kind == "cosine":
                fn = cosine_schedule
            else:
                raise ValueError(kind)""",
        # a conditional expression
        'fn = linear_schedule if kind == "linear" else cosine_schedule',
    ],
)
def test_float64_schedule_from_a_function_picked_at_run_time_then_cast_is_quiet(
    pick: str,
) -> None:
    assert_marked(
        f"""
    import torch
    from torch import nn
    def linear_schedule(steps):
        return torch.linspace(1e-4, 0.02, steps, dtype=torch.float64)
    def cosine_schedule(steps):
        t = torch.linspace(0, steps, steps + 1, dtype=torch.float64) / steps
        f = torch.cos(t) ** 2
        return torch.clip(1 - f[1:] / f[:-1], 0, 0.999)
    class Diffusion(nn.Module):
        def __init__(self, steps, kind):
            super().__init__()
            {pick}
            betas = fn(steps)
            to_buffer = lambda name, val: self.register_buffer(name, val.to(torch.float32))
            to_buffer("betas", betas)
            self.net = nn.Linear(4, 4)
    def train(model, x, optimizer):
        model(x).sum().backward()
        optimizer.step()
    """,
        "TD102",
    )


def test_float64_schedule_from_a_picked_function_registered_as_is_is_flagged() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    def linear_schedule(steps):
        return torch.linspace(1e-4, 0.02, steps, dtype=torch.float64)  # expect: TD102
    class Diffusion(nn.Module):
        def __init__(self, steps, kind):
            super().__init__()
            if kind == "linear":
                fn = linear_schedule
            else:
                raise ValueError(kind)
            self.register_buffer("betas", fn(steps))
            self.net = nn.Linear(4, 4)
    def train(model, x, optimizer):
        model(x).sum().backward()
        optimizer.step()
    """,
        "TD102",
    )


@pytest.mark.parametrize(
    "back",
    [
        "return (x - parallel).to(dtype)",
        "return (x - parallel).type(dtype)",
        "out = (x - parallel).to(dtype=dtype)\n        return out",
    ],
)
def test_float64_step_cast_back_to_the_input_dtype_is_quiet(back: str) -> None:
    assert_marked(
        f"""
    import torch
    def project(x, y):
        dtype = x.dtype
        x, y = x.double(), y.double()
        unit = y / y.norm(dim=-1, keepdim=True)
        parallel = (x * unit).sum(dim=-1, keepdim=True) * unit
        {back}
    def train(model, x, y, optimizer):
        model(project(x, y)).sum().backward()
        optimizer.step()
    """,
        "TD102",
    )


def test_float64_step_cast_to_a_float64_dtype_is_flagged() -> None:
    assert_marked(
        """
    import torch
    def project(x, y):
        dtype = torch.float64
        x = x.double()  # expect: TD102
        return (x * y).to(dtype)  # expect: TD102
    def train(model, x, y, optimizer):
        model(project(x, y)).sum().backward()
        optimizer.step()
    """,
        "TD102",
    )


def test_float64_schedule_bound_in_each_branch_then_cast_is_quiet() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    def linear_schedule(steps):
        return torch.linspace(1e-4, 0.02, steps, dtype=torch.float64)
    def cosine_schedule(steps):
        t = torch.linspace(0, steps, steps + 1, dtype=torch.float64) / steps
        return torch.clip(1 - torch.cos(t[1:]) / torch.cos(t[:-1]), 0, 0.999)
    class Diffusion(nn.Module):
        def __init__(self, steps, kind):
            super().__init__()
            if kind == "linear":
                betas = linear_schedule(steps)
            elif kind == "cosine":
                betas = cosine_schedule(steps)
            else:
                raise ValueError(kind)
            alphas = torch.cumprod(1.0 - betas, dim=0)
            self.register_buffer("betas", betas.float())
            self.register_buffer("alphas", alphas.float())
            self.net = nn.Linear(4, 4)
    def train(model, x, optimizer):
        model(x).sum().backward()
        optimizer.step()
    """,
        "TD102",
    )


def test_float64_step_through_einops_and_a_local_helper_cast_back_is_quiet() -> None:
    """The value comes back out of the helper call it went into (not out of every call
    of the helper, some of which feed the model), and einops only reshapes it."""
    assert_marked(
        """
    import torch
    from einops import rearrange
    def flat(t):
        return rearrange(t, "b c h w -> b (c h w)")
    def project(x, y):
        dtype = x.dtype
        x, y = flat(x).double(), flat(y).double()
        unit = y / y.norm(dim=-1, keepdim=True)
        return flat(x * unit).to(dtype)
    def train(model, x, y, optimizer):
        model(flat(x) + project(x, y)).sum().backward()
        optimizer.step()
    """,
        "TD102",
    )


def test_float64_through_a_local_helper_into_the_model_is_still_flagged() -> None:
    assert_marked(
        """
    import torch
    from einops import rearrange
    def flat(t):
        return rearrange(t, "b c h w -> b (c h w)")
    def train(model, x, optimizer):
        stats = flat(x).float().mean()
        model(flat(x.double())).sum().backward()  # expect: TD102
        optimizer.step()
    """,
        "TD102",
    )


def test_float64_sampler_weights_choose_examples_and_stay_quiet() -> None:
    # WeightedRandomSampler casts its weights to float64 itself; they pick indices and
    # never become the batches the model sees.
    assert_marked(
        """
    import torch
    from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler
    def main(model, optimizer, x, y):
        weights = (1.0 / torch.bincount(y).double())[y]
        sampler = WeightedRandomSampler(weights, num_samples=len(y))
        loader = DataLoader(TensorDataset(x, y), batch_size=4, sampler=sampler)
        for xb, yb in loader:
            model(xb).sum().backward()
            optimizer.step()
    """,
        "TD102",
    )


# Round 5's pretrain-gnns: the loss computed in float64 on the output logits and targets
# only; the network runs in float32.
LOSS_ONLY = {
    "plain loop": """
import torch
from torch import nn

criterion = nn.BCEWithLogitsLoss(reduction="none")

def train(model, loader, optimizer):
    for batch in loader:
        pred = model(batch.x)
        y = batch.y.view(pred.shape).to(torch.float64)
        loss = criterion(pred.double(), y).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
    "trainer with a loss helper": """
import torch
import torch.nn.functional as F

class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters())

    def loss(self, logits, labels):
        return F.binary_cross_entropy_with_logits(logits.double(), labels.double())

    def step(self, x, labels):
        loss = self.loss(self.model(x), labels)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
""",
}


def test_float64_only_on_a_loss_input_and_target_is_information() -> None:
    for shape, source in LOSS_ONLY.items():
        found = lint_findings(source, "TD102")
        assert found, shape
        assert {f.severity for f in found} == {Severity.INFO}, shape
        assert all("only as an input or target of the loss" in f.message for f in found)


def test_float64_input_of_the_network_matches_a_model_made_float64_elsewhere() -> None:
    """A float32 network rejects a float64 input, so where this file never converts the
    model, the cast on its input says the model is float64 already: information there,
    not the loss-only note; the conversion is where the cost is decided."""
    source = LOSS_ONLY["plain loop"].replace(
        "pred = model(batch.x)", "pred = model(batch.x.double())"
    )
    found = {f.location.line: f for f in lint_findings(source, "TD102")}
    assert found[9].severity is Severity.INFO
    assert "made so elsewhere" in found[9].message


def test_test_code_is_told_by_the_path_inside_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchdoctor.static import LintConfig, lint

    monkeypatch.chdir(tmp_path)  # the current folder is above the project, as /tmp may be

    buggy = (LAB / "TD102-float64-in-training" / "buggy.py").read_text(encoding="utf-8")
    # a checkout that happens to live under a folder named `tests`: not test code
    project = tmp_path / "tests" / "energy"
    (project / "tests").mkdir(parents=True)
    (project / "train.py").write_text(buggy, encoding="utf-8")
    (project / "tests" / "test_train.py").write_text(buggy, encoding="utf-8")
    report = lint(project, config=LintConfig(), jobs=1)
    flagged = {Path(f.location.path or "").name for f in report.by_code("TD102")}
    assert flagged == {"train.py"}  # float64 in the project's own tests is on purpose
