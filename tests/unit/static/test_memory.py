"""TD701 figures-never-closed and TD702 empty-cache-in-loop."""

from __future__ import annotations

import pytest

from tests.unit.static.helpers import lint_codes, lint_findings
from torchdoctor.findings import Applicability, Severity

# --- TD701 ------------------------------------------------------------------------------

PLOT_EACH_EPOCH = """
import matplotlib.pyplot as plt

def train(history, epochs):
    for epoch in range(epochs):
        history.append(step())
        fig, ax = plt.subplots()
        ax.plot(history)
        fig.savefig("loss.png")
        {extra}
"""


def td701(source: str) -> list[tuple[str, int]]:
    return lint_codes(source, "TD701", "TD001")


def test_figure_made_every_epoch_and_never_closed_is_flagged() -> None:
    assert td701(PLOT_EACH_EPOCH.format(extra="")) == [("TD701", 7)]


# Round 5's yolov7 plots.py: a plotting helper run by hand over a few results files; its
# figures are not the per-epoch leak of a training run.
OUTSIDE_TRAINING = {
    "plain script over result files": """
import glob
import matplotlib.pyplot as plt

for path in sorted(glob.glob("results*.txt")):
    fig, ax = plt.subplots()  # expect: TD701
    ax.plot(load(path))
    fig.savefig(path + ".png")
""",
    "trainer with a plotting helper after fit": """
import matplotlib.pyplot as plt

class Trainer:
    def fit(self, epochs):
        for epoch in range(epochs):
            self.history.append(self.train_epoch())
        self.plot_history()

    def plot_history(self):
        for name, values in self.metrics.items():
            fig = plt.figure()  # expect: TD701
            plt.plot(values)
            fig.savefig(name + ".png")
""",
    # hulc's t-SNE report: one figure per trained model, named after its best epoch
    "report over trained models naming their best epoch": """
import matplotlib.pyplot as plt

def plot_runs(runs):
    for name, run in runs.items():
        epoch, _ = max(run["scores"].items(), key=lambda item: item[1])
        fig = plt.figure(figsize=(10, 10))  # expect: TD701
        plt.plot(run["curve"])
        fig.savefig(f"{name}_{epoch}.pdf")
""",
    "callback at the end of training": """
import matplotlib.pyplot as plt

class PlotCallback:
    def on_train_end(self, trainer):
        for head in range(trainer.model.heads):
            plt.figure(figsize=(6, 4))  # expect: TD701
            plt.imshow(trainer.attention(head))
            plt.savefig(f"head{head}.png")
""",
}


def test_figures_made_outside_training_are_information() -> None:
    for shape, source in OUTSIDE_TRAINING.items():
        found = lint_findings(source, "TD701")
        marked = [i for i, line in enumerate(source.splitlines(), 1) if "expect: TD701" in line]
        assert [(f.location.line, f.severity) for f in found] == [
            (line, Severity.INFO) for line in marked
        ], shape
        assert "no training" in found[0].message


def test_figures_made_by_a_helper_or_hook_run_every_epoch_stay_warnings() -> None:
    helper = OUTSIDE_TRAINING["trainer with a plotting helper after fit"].replace(
        "            self.history.append(self.train_epoch())\n        self.plot_history()",
        "            self.history.append(self.train_epoch())\n            self.plot_history()",
    )
    hook = OUTSIDE_TRAINING["callback at the end of training"].replace(
        "on_train_end", "on_validation_epoch_end"
    )
    for source in (helper, hook):
        assert source not in OUTSIDE_TRAINING.values()
        [found] = lint_findings(source, "TD701")
        assert found.severity is Severity.WARNING


def test_message_names_the_loop_and_the_fix_closes_the_figure() -> None:
    (found,) = lint_findings(PLOT_EACH_EPOCH.format(extra=""), "TD701")
    assert "loop at line 5" in found.message
    assert "`plt.close(fig)`" in found.fix_hint


def test_any_spelling_of_pyplot_is_recognised() -> None:
    source = """
    from matplotlib import pyplot
    from matplotlib.pyplot import figure as new_figure
    for i in range(10):
        pyplot.figure()
        pyplot.plot([1, 2])
        pyplot.savefig(f"{i}.png")
        new_figure(figsize=(3, 3))
    """
    assert td701(source) == [("TD701", 5), ("TD701", 8)]


def test_figure_numbered_by_the_loop_variable_is_a_new_figure_each_time() -> None:
    source = """
    import matplotlib.pyplot as plt
    for epoch in range(10):
        plt.figure(epoch)
        plt.savefig(f"{epoch}.png")
    """
    assert td701(source) == [("TD701", 4)]


def test_closing_the_figure_in_the_loop_is_quiet() -> None:
    for close in ("plt.close(fig)", "plt.close()", 'plt.close("all")'):
        assert td701(PLOT_EACH_EPOCH.format(extra=close)) == []


def test_closing_in_the_outer_loop_bounds_the_figures_and_is_quiet() -> None:
    source = """
    import matplotlib.pyplot as plt
    for epoch in range(10):
        for name in ("loss", "accuracy"):
            fig = plt.figure()
            fig.savefig(f"{name}.png")
        plt.close("all")
    """
    assert td701(source) == []


def test_a_reused_figure_number_or_name_is_quiet() -> None:
    source = """
    import matplotlib.pyplot as plt
    for epoch in range(10):
        fig = plt.figure("loss")
        fig.clf()
        plt.figure(1)
        plt.subplots(num="grid")
    """
    assert td701(source) == []


def test_figures_meant_for_plt_show_are_quiet() -> None:
    source = """
    import matplotlib.pyplot as plt
    def compare(runs):
        for run in runs:
            plt.figure()
            plt.plot(run)
        plt.show()
    """
    assert td701(source) == []


def test_a_figure_handed_to_a_call_that_closes_it_is_quiet() -> None:
    source = """
    import matplotlib.pyplot as plt
    from torch.utils.tensorboard import SummaryWriter
    writer = SummaryWriter()
    for epoch in range(10):
        fig, ax = plt.subplots()
        writer.add_figure("loss", fig, epoch)
    """
    assert td701(source) == []


# Round 35 (pytorch-forecasting): a plotting method loops over the model's targets, makes
# its figure only while no axis was given, and returns every figure to its caller.
@pytest.mark.parametrize(
    "loop",
    [
        # made on the first pass only: the guard tests a name the same call binds
        """
    for target in targets:
        if ax is None:
            fig, ax = plt.subplots()
        ax.plot(target)
        fig.savefig(f"{target}.png")""",
        # collected in a list the function returns: the caller owns the figures
        """
    figs = []
    for target in targets:
        fig, ax = plt.subplots()
        ax.plot(target)
        figs.append(fig)
    return figs""",
    ],
)
def test_a_figure_made_once_or_returned_to_the_caller_is_quiet(loop: str) -> None:
    source = f"""
import matplotlib.pyplot as plt

def train_and_plot(model, optimizer, targets, ax=None):
    loss = model(targets).sum()
    loss.backward()
    optimizer.step(){loop}
"""
    assert td701(source) == []
    kept = source.replace("if ax is None:", "if targets:").replace("return figs", "return None")
    assert td701(kept) != []


def test_add_figure_told_not_to_close_still_leaks() -> None:
    source = """
    import matplotlib.pyplot as plt
    for epoch in range(10):
        fig, ax = plt.subplots()
        writer.add_figure("loss", fig, epoch, close=False)
    """
    assert td701(source) == [("TD701", 4)]


def test_object_oriented_figures_and_figures_outside_loops_are_quiet() -> None:
    source = """
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    fig, ax = plt.subplots()
    for epoch in range(10):
        ax.plot([epoch])
        other = Figure()
        other.savefig("x.png")
    fig.savefig("all.png")
    """
    assert td701(source) == []


def test_a_figure_in_a_function_defined_in_the_loop_is_not_in_the_loop() -> None:
    source = """
    import matplotlib.pyplot as plt
    for epoch in range(3):
        def plot():
            fig = plt.figure()
            return fig
    """
    assert td701(source) == []


# --- TD702 ------------------------------------------------------------------------------

STEP_LOOP = """
import torch

def train(model, loader, optimizer, criterion):
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
{inner}
{outer}
"""


def td702(inner: str = "", outer: str = "") -> list[tuple[str, int]]:
    return lint_codes(STEP_LOOP.format(inner=inner, outer=outer), "TD702", "TD001")


def test_empty_cache_every_step_is_flagged() -> None:
    assert td702(inner="            torch.cuda.empty_cache()") == [("TD702", 11)]


def test_every_device_spelling_is_recognised() -> None:
    source = STEP_LOOP.format(
        inner="""\
            torch.cuda.memory.empty_cache()
            torch.mps.empty_cache()
            torch.accelerator.empty_cache()""",
        outer="",
    )
    assert lint_codes(source, "TD702", "TD001") == [("TD702", 11), ("TD702", 12), ("TD702", 13)]


def test_empty_cache_in_a_nested_loop_inside_the_step_loop_is_flagged() -> None:
    inner = "            for p in model.parameters():\n                torch.cuda.empty_cache()"
    assert td702(inner=inner) == [("TD702", 12)]


def test_the_fix_deletes_the_call_and_is_unsafe() -> None:
    source = STEP_LOOP.format(inner="            torch.cuda.empty_cache()", outer="")
    (found,) = lint_findings(source, "TD702")
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    (edit,) = found.fix.edits
    assert (edit.start_line, edit.end_line, edit.replacement) == (11, 12, "")


def test_once_per_epoch_is_quiet() -> None:
    assert td702(outer="        torch.cuda.empty_cache()") == []


def test_periodic_or_memory_pressure_calls_are_quiet() -> None:
    periodic = "            if epoch % 10 == 0:\n                torch.cuda.empty_cache()"
    pressure = (
        "            if torch.cuda.memory_reserved() > limit:\n"
        "                torch.cuda.empty_cache()"
    )
    assert td702(inner=periodic) == []
    assert td702(inner=pressure) == []


_SKIPPED_UNLESS = """
import torch
def run(model, loader, optimizer, every, debug):
    step = 0
    for x in loader:
        with torch.autocast("cuda"):
            model(x).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        step += 1
        {skip}
        torch.cuda.empty_cache()
        evaluate(model)
"""


@pytest.mark.parametrize(
    ("skip", "flagged"),
    [
        # seamless_communication's finetune loop: skip every step but the eval steps
        ("if not step or step % every != 0:\n            continue", False),
        ("if step % every:\n            print(step)\n            continue", False),
        ("if not (step % every == 0):\n            continue", False),
        ("if debug:\n            continue", True),  # not periodic: every step still
        ("if step % every == 0:\n            continue", True),  # skips one step in k
        ("if initial_step > 0:\n            initial_step -= 1\n            continue", True),
        ("if step % every != 0:\n            print(step)", True),  # no skip
    ],
)
def test_a_periodic_skip_before_the_call_is_only_sometimes(skip: str, flagged: bool) -> None:
    assert bool(lint_codes(_SKIPPED_UNLESS.format(skip=skip), "TD702")) is flagged


def test_out_of_memory_recovery_is_quiet() -> None:
    source = """
    import torch
    for x, y in loader:
        try:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
    """
    assert lint_codes(source, "TD702", "TD001") == []


def test_crash_recovery_or_switched_off_branches_are_quiet() -> None:
    """DeCLIP: when the loss turns NaN the step sets ``resume`` and, under ``if resume:``,
    empties the cache and reloads the last checkpoint: recovery, not every step. A branch
    switched off in the source (``if resume and False:``) never runs. A branch that only
    tests a flag, or one taken when the flag is off, still runs on ordinary steps."""
    recovery = (
        "            if resume:\n"
        "                torch.cuda.empty_cache()\n"
        "                model.load_state_dict(torch.load(last))"
    )
    switched_off = "            if resume and False:\n                torch.cuda.empty_cache()"
    flag = "            if verbose:\n                torch.cuda.empty_cache()"
    other_side = (
        "            if resume:\n"
        "                model.load_state_dict(torch.load(last))\n"
        "            else:\n"
        "                torch.cuda.empty_cache()"
    )
    assert td702(inner=recovery) == []
    assert td702(inner=switched_off) == []
    assert td702(inner=flag) == [("TD702", 12)]
    assert td702(inner=other_side) == [("TD702", 14)]


def test_loops_that_do_not_train_are_quiet() -> None:
    source = """
    import torch
    @torch.no_grad()
    def evaluate(model, loader):
        for x, y in loader:
            model(x)
            torch.cuda.empty_cache()
    for name, size in sizes.items():
        torch.cuda.empty_cache()
    """
    assert lint_codes(source, "TD702", "TD001") == []


def test_a_helper_named_empty_cache_is_not_torchs() -> None:
    source = STEP_LOOP.format(inner="            cache.empty_cache()", outer="")
    assert lint_codes(source, "TD702", "TD001") == []


FIXED_SETTINGS = """
import matplotlib.pyplot as plt
{setup}
for lr in {iterable}:
    train(lr)
    plt.figure()
    plt.savefig(f"{{lr}}.png")
"""


@pytest.mark.parametrize(
    "setup, iterable, severity",
    [
        ("", "[0.1, 0.01, 0.001]", Severity.INFO),  # a literal of three settings
        ("RATES = (0.1, 0.01)", "RATES", Severity.INFO),  # through a name
        ("RUNS = {'a': 1, 'b': 2}", "RUNS.items()", Severity.INFO),  # a dict view
        ("", "range(2, 6)", Severity.INFO),
        ("", "range(1000)", Severity.WARNING),  # too many passes to be harmless
        ("", "range(1, 5, 0)", Severity.WARNING),  # not a valid range: not counted
        ("RATES = []\nRATES.append(0.1)", "RATES", Severity.WARNING),  # grown elsewhere
        ("", "load_rates()", Severity.WARNING),  # depends on data
    ],
)
def test_td701_a_loop_over_a_few_fixed_settings_is_information(
    setup: str, iterable: str, severity: Severity
) -> None:
    (found,) = lint_findings(FIXED_SETTINGS.format(setup=setup, iterable=iterable), "TD701")
    assert found.severity is severity


@pytest.mark.parametrize(
    ("guard", "after", "flagged"),
    [
        # Neural-Scene-Flow-Fields: `TEST = False` just above `if TEST:`, dead debug code
        ("TEST = False\n        if TEST:", "", False),
        # a dump that plots, saves and ends the program makes one figure at most
        ("if args.dump:", "sys.exit()", False),
        ("if args.dump:", "os._exit(0)", False),
        ("if args.dump:", "exit()", False),
        # a switch the run sets, and a branch that goes on training, keep the finding
        ("if args.dump:", "", True),
        ("TEST = args.test\n        if TEST:", "", True),
        ("if args.dump:", "print('dumped')", True),
    ],
)
def test_td701_a_figure_made_in_dead_or_exiting_debug_code(
    guard: str, after: str, flagged: bool
) -> None:
    source = f"""
import os
import sys
import matplotlib.pyplot as plt

def train(args, model, optimizer, loader):
    for x, y in loader:
        {guard}
            plt.figure()
            plt.imshow(x[0])
            plt.savefig("debug.png")
            {after}
        loss = model(x, y)
        loss.backward()
        optimizer.step()
"""
    assert bool(td701(source)) is flagged
