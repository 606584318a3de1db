"""TD102's warning needs proof: float64 that reaches training, in a file that shows no need.

A file that asks for more precision than float32 has (a tolerance below its resolution, a
numerically sensitive solver, a gradient check) made its float64 on purpose: information,
with the reason. float64 the file does not show reaching training is information too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import labkit
from tests.unit.static.helpers import lint_findings
from torchdoctor.findings import Depth, Severity
from torchdoctor.static import LintConfig, lint
from torchdoctor.static.analysis.precision import FLOAT32_RESOLUTION, is_tolerance_name

# An ODE fit in the shape of torchdiffeq's examples: the whole program in float64.
ODE = """
import torch
from torch import nn
from torchdiffeq import odeint

torch.set_default_dtype(torch.float64)

class Dynamics(nn.Module):
    def __init__(self):
        super().__init__()
        self.rate = nn.Parameter(torch.tensor([0.5]))

    def forward(self, t, y):
        return -self.rate * y

def main(y0, times, observed):
    model = Dynamics()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    for step in range(100):
        optimizer.zero_grad()
        predicted = odeint(model, y0, times, TOLERANCES)
        loss = (predicted - observed).pow(2).mean()
        loss.backward()
        optimizer.step()
"""


def _severities(source: str) -> set[Severity]:
    return {f.severity for f in lint_findings(source, "TD102")}


@pytest.mark.parametrize(
    "tolerances",
    ["atol=1e-8, rtol=1e-8", "rtol=1e-10", "tol=1e-9", "method='dopri5', abs_tol=1e-12"],
)
def test_a_solver_tolerance_below_float32_resolution_makes_float64_information(
    tolerances: str,
) -> None:
    (found,) = lint_findings(ODE.replace("TOLERANCES", tolerances), "TD102")
    assert found.severity is Severity.INFO
    assert "on purpose" in found.message
    assert "below float32's resolution" in found.message
    assert found.evidence["precision"] == "tolerance"


@pytest.mark.parametrize(
    "binding",
    [
        "ATOL = 1e-9\n",  # a module constant
        "def solve_options(atol=1e-9):\n    return atol\n",  # a default
        "OPTIONS = {'rtol': 1e-9, 'atol': 1e-10}\n",  # a dict of solver options
        "class Config:\n    rtol: float = 5e-8\n",  # an annotated field
    ],
)
def test_a_tolerance_bound_by_name_default_or_key_counts_too(binding: str) -> None:
    source = ODE.replace("TOLERANCES", "method='rk4'") + binding
    assert _severities(source) == {Severity.INFO}


@pytest.mark.parametrize(
    "tolerances",
    [
        "atol=1e-6, rtol=1e-5",  # float32 meets these
        "method='rk4', eps=1e-8",  # an eps is a guard, not a tolerance
        "atol=0",  # zero is no tolerance asked for
    ],
)
def test_tolerances_float32_can_meet_and_eps_guards_leave_the_warning(tolerances: str) -> None:
    assert _severities(ODE.replace("TOLERANCES", tolerances)) == {Severity.WARNING}


def test_division_guards_in_float64_training_leave_the_warning() -> None:
    source = """
    import torch
    from torch import nn

    def main(x, y):
        torch.set_default_dtype(torch.float64)
        model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8, eps=1e-12), nn.Linear(8, 1))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-8)
        for step in range(10):
            pred = model(x / (x.norm() + 1e-12))
            loss = (pred - y).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    assert _severities(source) == {Severity.WARNING}


@pytest.mark.parametrize(
    "solve",
    [
        "factor = torch.linalg.cholesky(kernel)",
        "factor = torch.cholesky(kernel)",
        "sign, factor = torch.linalg.slogdet(kernel)",
        "factor = torch.linalg.solve(kernel, y[:, None])",
    ],
)
def test_a_sensitive_solver_in_the_file_makes_float64_information(solve: str) -> None:
    source = f"""
    import torch

    def main(log_length, optimizer):
        x = torch.linspace(0, 1, 50, dtype=torch.float64)
        y = torch.sin(x)
        for step in range(10):
            kernel = torch.exp(-(x[:, None] - x[None, :]).pow(2) / log_length.exp())
            {solve}
            loss = factor.sum() + y.sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    found = lint_findings(source, "TD102")
    assert found and {f.severity for f in found} == {Severity.INFO}
    assert all(f.evidence["precision"] == "solver" for f in found)


def test_a_well_conditioned_linear_algebra_call_leaves_the_warning() -> None:
    source = """
    import torch

    def main(model, x, optimizer):
        for step in range(10):
            loss = (model(x) * x.double()).sum() + torch.linalg.norm(x)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    assert _severities(source) == {Severity.WARNING}


def test_a_gradient_check_in_the_file_makes_float64_information() -> None:
    source = """
    import torch
    from torch.autograd import gradcheck

    def check(layer):
        x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
        return gradcheck(layer, (x,))

    def main(model, x, optimizer):
        model = model.double()
        for step in range(10):
            loss = model(x).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    found = lint_findings(source, "TD102")
    assert [f.severity for f in found] == [Severity.INFO]
    assert found[0].evidence["precision"] == "gradcheck"


@pytest.mark.parametrize(
    "imported",
    [
        "from pyro.contrib.timeseries import IndependentMaternGP as GP",
        "from gpytorch.models import ExactGP as GP",
    ],
)
def test_a_gaussian_process_model_makes_float64_information(imported: str) -> None:
    """Round 41's Pyro example: a Matern GP and its data made float64, trained with Adam;
    a GP's likelihood factors its kernel matrix at every step. A model of another library
    leaves the warning."""
    source = f"""
    import torch
    {imported}

    def main(data, steps):
        data = data.double()
        gp = GP(nu=1.5, obs_dim=3).double()
        adam = torch.optim.Adam(gp.parameters(), lr=0.01)
        for step in range(steps):
            adam.zero_grad()
            loss = -gp.log_prob(data).sum()
            loss.backward()
            adam.step()
    """
    found = lint_findings(source, "TD102")
    assert found and {f.severity for f in found} == {Severity.INFO}
    assert found[0].evidence["precision"] == "solver"
    other = source.replace(imported, "from mylib.models import Matern as GP")
    assert Severity.WARNING in {f.severity for f in lint_findings(other, "TD102")}


# --- float64 the file does not show reaching training ----------------------------------


def test_float64_kept_in_an_attribute_or_returned_away_is_information() -> None:
    source = """
    import torch

    class Trainer:
        def __init__(self, model, steps):
            self.model = model
            self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            self.history = torch.zeros(steps, dtype=torch.float64)

        def fit(self, x):
            for step in range(len(self.history)):
                loss = self.model(x).sum()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()

    def reference(n):
        return torch.randn(n, 4, dtype=torch.float64)
    """
    found = lint_findings(source, "TD102")
    assert [(f.location.line, f.severity) for f in found] == [
        (8, Severity.INFO),
        (18, Severity.INFO),
    ]
    assert all("does not show the value reaching" in f.message for f in found)


def test_unused_float64_is_information_and_the_default_dtype_still_a_warning() -> None:
    source = """
    import torch

    inputs = torch.randn(64, 4, dtype=torch.float64)
    torch.set_default_dtype(torch.float64)

    def step(model, optimizer, loss):
        loss.backward()
        optimizer.step()
    """
    found = lint_findings(source, "TD102")
    assert [(f.location.line, f.severity) for f in found] == [
        (4, Severity.INFO),
        (5, Severity.WARNING),
    ]
    assert "is never used" in found[0].message


def test_tolerance_names() -> None:
    for name in ("atol", "rtol", "tol", "TOL", "abs_tol", "tolerance_change", "_rtol"):
        assert is_tolerance_name(name), name
    for name in ("eps", "epsilon", "lr", "stol_x", "total", "atoll"):
        assert not is_tolerance_name(name), name
    assert 1e-7 < FLOAT32_RESOLUTION < 1.2e-7


# --- the lab's extra shapes: a buggy_/fixed_ pair at the lint depth ---------------------

_LAB = labkit.LAB / "TD102-float64-in-training"


@pytest.mark.parametrize("shape", sorted(p.stem[6:] for p in _LAB.glob("buggy_*.py")))
def test_lab_shape_flagged_as_marked_and_its_fix_quiet(shape: str) -> None:
    def warnings(path: Path) -> set[tuple[str, int]]:
        report = lint(path, config=LintConfig(), jobs=1)
        return {
            (f.code, f.location.line or 0)
            for f in report.by_code("TD102")
            if f.severity >= Severity.WARNING
        }

    buggy = _LAB / f"buggy_{shape}.py"
    assert warnings(buggy) == labkit.expected_marks(buggy, Depth.LINT)
    assert not lint(_LAB / f"fixed_{shape}.py", config=LintConfig(), jobs=1).by_code("TD102")


# float64 made under a switch named for it: the user's choice, whatever the spelling.
OPTION_TRAINER = """
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--fp64", action="store_true")
parser.add_argument("--dtype", default="float32")
args = parser.parse_args()

def train(model, loader, double_precision=False):
    optimizer = torch.optim.Adam(model.parameters())
    for inputs, targets in loader:
        if double_precision:
            inputs = inputs.double()
        if args.dtype == "float64":
            targets = targets.to(torch.float64)
        inputs = inputs.to(torch.float64 if args.fp64 else torch.float32)
        if inputs.dtype != torch.float64:
            inputs = inputs.double()
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs), targets).backward()
        optimizer.step()
"""


def test_float64_chosen_by_an_option_is_information_naming_the_option() -> None:
    found = {f.location.line: f for f in lint_findings(OPTION_TRAINER, "TD102")}
    chosen = sorted(line for line, f in found.items() if f.severity is Severity.INFO)
    assert chosen == [15, 17]
    assert "the option `double_precision` (line 14)" in found[15].message
    assert 'the option `args.dtype == "float64"` (line 16)' in found[17].message
    # A test of the tensor's own dtype is no option: that conversion is still a warning.
    assert found[20].severity is Severity.WARNING


@pytest.mark.parametrize(
    ("other_arm", "severity"),
    [
        # TALENT: every method trains in float64 unless --use_float casts it to float32
        ("self.model.float()", Severity.INFO),
        ("self.model.half()", Severity.INFO),
        # a float32 cast of something else, or no cast, is no precision switch
        ("self.head.float()", Severity.WARNING),
        ("print('float64 it is')", Severity.WARNING),
    ],
)
def test_a_double_on_one_arm_of_a_precision_switch_is_chosen(
    other_arm: str, severity: Severity
) -> None:
    source = f"""
import torch
from torch import nn

class Method:
    def build(self, args):
        self.model = nn.Linear(8, 2)
        self.head = nn.Linear(2, 2)
        if args.use_float:
            {other_arm}
        else:
            self.model.double()

    def fit(self, x, y):
        optimizer = torch.optim.Adam(self.model.parameters())
        loss = nn.functional.mse_loss(self.model(x.double()), y.double())
        loss.backward()
        optimizer.step()
"""
    found = [f for f in lint_findings(source, "TD102") if f.location.line == 12]
    assert [f.severity for f in found] == [severity]


BOUNDS = """
import torch
from torch import nn


def last_iteration(model, x):
    {doc}
    {comment}
    return model.double()


def optimise(model, x, alphas, steps):
    optimizer = torch.optim.Adam(alphas, lr=0.1)
    for _ in range(steps):
        loss = model(x).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return last_iteration(model, x)
"""


@pytest.mark.parametrize(
    ("doc", "comment", "severity"),
    [
        # auto_LiRPA: the docstring gives the reason
        ('"""Move to float64 to alleviate floating point error."""', "", Severity.INFO),
        ("", "# double precision for tighter bounds", Severity.INFO),
        # a comment that says nothing of precision, or none at all
        ("", "# the last iteration", Severity.WARNING),
        ("", "", Severity.WARNING),
    ],
)
def test_float64_whose_comment_or_docstring_gives_precision_as_reason_is_information(
    doc: str, comment: str, severity: Severity
) -> None:
    source = BOUNDS.format(doc=doc or "pass", comment=comment)
    found = [f for f in lint_findings(source, "TD102") if f.location.line == 9]
    assert [f.severity for f in found] == [severity]
    if severity is Severity.INFO:
        assert found[0].evidence["precision"] == "stated"


def test_a_nonlinear_least_squares_layer_makes_float64_information() -> None:
    """Round 82's Theseus examples: a float64 parameter learned through a Levenberg-
    Marquardt layer, whose steps solve the normal equations; the same program with no
    such layer keeps the warning."""
    source = """
    import torch
    import theseus as th

    def main(objective, targets, steps):
        torch.set_default_dtype(torch.double)
        scale = torch.nn.Parameter(torch.tensor([3.0]))
        layer = th.TheseusLayer(th.LevenbergMarquardt(objective))
        optimizer = torch.optim.Adam([scale], lr=0.01)
        for step in range(steps):
            optimizer.zero_grad()
            solution, _ = layer.forward({"scale": scale})
            loss = (solution["x"] - targets).square().sum()
            loss.backward()
            optimizer.step()
    """
    found = lint_findings(source, "TD102")
    assert found and {f.severity for f in found} == {Severity.INFO}
    assert found[0].evidence["precision"] == "solver"
    other = source.replace("import theseus as th", "import mylib as th")
    assert Severity.WARNING in {f.severity for f in lint_findings(other, "TD102")}
