"""The pytest plugin and ``torchdoctor.testing``: pass on healthy training, fail with the
report on broken training, through the fixture, the marker and the plain function."""

from __future__ import annotations

import pytest

pytest_plugins = ("pytester",)
pytestmark = pytest.mark.needs_torch

_SETUP = """
import pytest
import torch
from torch import nn

def make(softmax=False):
    torch.manual_seed(0)
    layers = [nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)]
    if softmax:
        layers.append(nn.Softmax(dim=1))
    model = nn.Sequential(*layers)
    batch = (torch.randn(16, 8), torch.randint(0, 3, (16,)))
    return model, batch, nn.CrossEntropyLoss(), torch.optim.Adam(model.parameters(), 1e-2)

def train(clear_grads):
    model, (x, y), loss_fn, optimizer = make()
    for _ in range(12):
        if clear_grads:
            optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
"""


def _outcome(pytester: pytest.Pytester, body: str) -> pytest.RunResult:
    pytester.makepyfile(test_training=_SETUP + body)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")


def test_assert_healthy_returns_the_report_of_a_healthy_setup() -> None:
    torch = pytest.importorskip("torch")
    from torchdoctor.testing import assert_healthy

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    batch = (torch.randn(16, 8), torch.randint(0, 3, (16,)))
    optimizer = torch.optim.Adam(model.parameters(), 1e-2)
    report = assert_healthy(model, batch, torch.nn.CrossEntropyLoss(), optimizer)
    assert report.command == "check" and not report.findings


def test_assert_healthy_fails_with_the_report_and_honours_ignore() -> None:
    torch = pytest.importorskip("torch")
    from torchdoctor.testing import ReportAssertionError, assert_healthy

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 3), torch.nn.Softmax(dim=1))
    batch = (torch.randn(16, 8), torch.randint(0, 3, (16,)))
    optimizer = torch.optim.Adam(model.parameters(), 1e-2)
    with pytest.raises(ReportAssertionError) as caught:
        assert_healthy(model, batch, torch.nn.CrossEntropyLoss(), optimizer)
    message = str(caught.value)
    assert message.startswith("torchdoctor found 1 problem at or above warning (TD301):")
    assert "softmax" in message.lower() and "fix:" in message
    assert caught.value.report.codes() == {"TD301"}
    report = assert_healthy(model, batch, torch.nn.CrossEntropyLoss(), optimizer, ignore=["TD3"])
    assert "TD301" not in report.codes()


@pytest.mark.slow
def test_fixture_passes_healthy_and_fails_broken_setups(pytester: pytest.Pytester) -> None:
    result = _outcome(
        pytester,
        """
def test_healthy(torchdoctor):
    report = torchdoctor.assert_healthy(*make())
    assert torchdoctor.reports == [report]

def test_broken(torchdoctor):
    torchdoctor.assert_healthy(*make(softmax=True))

def test_broken_but_ignored(torchdoctor):
    torchdoctor.assert_healthy(*make(softmax=True), ignore=["TD301"])

def test_watch_block(torchdoctor):
    with torchdoctor.watch() as w:
        train(clear_grads=False)
""",
    )
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*torchdoctor found 1 problem at or above warning (TD301)*",
            "*torchdoctor found * at or above error (*TD201*",
        ]
    )


@pytest.mark.slow
def test_marker_fails_a_test_whose_training_has_an_error(pytester: pytest.Pytester) -> None:
    result = _outcome(
        pytester,
        """
@pytest.mark.torchdoctor
def test_grads_never_cleared():
    train(clear_grads=False)

@pytest.mark.torchdoctor
def test_correct_training():
    train(clear_grads=True)

@pytest.mark.torchdoctor(ignore=["TD201"])
def test_known_bug():
    train(clear_grads=False)

def test_unmarked_is_not_watched():
    train(clear_grads=False)
""",
    )
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_grads_never_cleared*",
            "*torchdoctor found * at or above error (*TD201*",
            "*grads-never-cleared*",
        ]
    )
    assert "test_correct_training FAILED" not in result.stdout.str()


@pytest.mark.slow
def test_marker_rejects_unknown_options(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.torchdoctor(fail_on="sometimes")
def test_it():
    pass
"""
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*fail_on='sometimes' is not one of*"])


def test_plugin_is_registered_and_declares_its_marker(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.has_plugin("torchdoctor")
    assert any(line.startswith("torchdoctor(") for line in pytestconfig.getini("markers"))
