"""TD705 cudnn-benchmark-with-deterministic."""

from __future__ import annotations

import pytest

from tests.unit.static.helpers import lint_codes, lint_findings
from torchdoctor.findings import Applicability, Confidence, Severity


def td705(source: str) -> list[tuple[str, int]]:
    return lint_codes(source, "TD705", "TD001")


def test_benchmark_with_deterministic_is_flagged_at_the_benchmark_line() -> None:
    source = """
    import torch
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = True
    """
    (found,) = lint_findings(source, "TD705")
    assert found.location.line == 4 and "(line 3)" in found.message
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    assert found.fix.edits[0].replacement == "False"


def test_aliases_and_use_deterministic_algorithms_are_recognised() -> None:
    source = """
    import torch
    from torch.backends import cudnn
    import torch.backends.cudnn as cd
    def setup():
        torch.use_deterministic_algorithms(True)
        cudnn.benchmark = True
    with cd.flags(enabled=True, benchmark=True, deterministic=True):
        pass
    """
    assert td705(source) == [("TD705", 7), ("TD705", 8)]


def test_settings_in_different_functions_have_medium_confidence() -> None:
    source = """
    import torch
    def seed_all():
        torch.backends.cudnn.deterministic = True
    def speed_up():
        torch.backends.cudnn.benchmark = True
    """
    (found,) = lint_findings(source, "TD705")
    assert found.confidence is Confidence.MEDIUM


def test_either_flag_alone_is_quiet() -> None:
    assert td705("import torch\ntorch.backends.cudnn.benchmark = True\n") == []
    assert (
        td705(
            "import torch\ntorch.backends.cudnn.deterministic = True\n"
            "torch.backends.cudnn.benchmark = False\n"
        )
        == []
    )


def test_exclusive_branches_are_quiet() -> None:
    source = """
    import torch
    def configure(args):
        if args.deterministic:
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False
        elif args.fast:
            torch.backends.cudnn.benchmark = True
        else:
            pass
    """
    assert td705(source) == []


def test_a_flag_switched_off_again_is_quiet() -> None:
    source = """
    import torch
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    """
    assert td705(source) == []


RESET_ELSEWHERE = """
import torch
def run(args, model):
    if args.test_only:
        {reset}
        torch.backends.cudnn.deterministic = True
        return evaluate(model)
    train(model)
def main(args):
    torch.backends.cudnn.benchmark = True
    run(args, build())
"""


@pytest.mark.parametrize(
    "reset, flagged",
    [
        ("torch.backends.cudnn.benchmark = False", False),  # off before determinism
        ("pass", True),
        ("torch.backends.cudnn.benchmark = args.bench", True),  # not known to be off
        ("if args.fast:\n            torch.backends.cudnn.benchmark = False", True),
    ],
)
def test_benchmark_switched_off_before_the_deterministic_request_is_quiet(
    reset: str, flagged: bool
) -> None:
    # the torchvision reference layout: main() turns benchmark on, the test-only path of
    # another function turns it off on the line before it asks for determinism
    source = RESET_ELSEWHERE.format(reset=reset)
    line = source.splitlines().index("    torch.backends.cudnn.benchmark = True") + 1
    assert td705(source) == ([("TD705", line)] if flagged else [])


def test_flags_from_variables_or_other_objects_are_quiet() -> None:
    source = """
    import torch
    torch.backends.cudnn.benchmark = not args.deterministic
    torch.backends.cudnn.deterministic = args.deterministic
    config.benchmark = True
    config.deterministic = True
    torch.use_deterministic_algorithms(False)
    """
    assert td705(source) == []


_FLAGS = """
import argparse
import torch
{parse}
def main():
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = True
    model = torch.load("model.pt")
    {body}
{guard}
"""


@pytest.mark.parametrize(
    ("parse", "body", "guard"),
    [
        # an inference demo run as a script
        ("", "print(model(torch.randn(1, 3, 32, 32)))", 'if __name__ == "__main__":\n    main()'),
        # an evaluation script that parses its command line at module level
        (
            "args = argparse.ArgumentParser().parse_args()",
            "with torch.no_grad():\n        print(model(torch.randn(1, 3, 32, 32)).argmax())",
            "main()",
        ),
    ],
)
def test_a_program_that_never_trains_gets_information(parse: str, body: str, guard: str) -> None:
    """Run-to-run equality matters for training; an inference or evaluation program at
    most differs in the last digits of its outputs."""
    (found,) = lint_findings(_FLAGS.format(parse=parse, body=body, guard=guard), "TD705")
    assert found.severity is Severity.INFO
    assert "takes no training step" in found.message


@pytest.mark.parametrize(
    ("body", "guard"),
    [
        # a training script
        (
            "opt = torch.optim.SGD(model.parameters(), 0.1)\n"
            "    model(torch.randn(1, 3)).sum().backward()\n    opt.step()",
            'if __name__ == "__main__":\n    main()',
        ),
        # a Lightning script: the training step is the framework's
        ("trainer = Trainer()\n    trainer.fit(model)", 'if __name__ == "__main__":\n    main()'),
        # a trainer class of another file does the steps
        (
            "optimizer = torch.optim.Adam(model.parameters())\n"
            "    Runner(model, optimizer).train(loader)",
            'if __name__ == "__main__":\n    main()',
        ),
        ("train_one_epoch(model, loader)", 'if __name__ == "__main__":\n    main()'),
        # a setup module with no program of its own: a training script may import it
        ("return model", ""),
    ],
)
def test_a_training_program_or_a_setup_module_gets_a_warning(body: str, guard: str) -> None:
    (found,) = lint_findings(_FLAGS.format(parse="", body=body, guard=guard), "TD705")
    assert found.severity is Severity.WARNING


@pytest.mark.parametrize(
    ("runner", "severity"),
    [
        # videocomposer: `run_net.py` runs the inference modules and trains nothing
        ("from tools.sample import sample\nif __name__ == '__main__':\n    sample()\n", "info"),
        # a training script imports it: what it sets up may be trained with
        (
            "import torch\nfrom tools.sample import sample\n"
            "if __name__ == '__main__':\n    model = sample()\n"
            "    model(torch.randn(2)).sum().backward()\n",
            "warning",
        ),
        # a module that imports it without a program of its own: may be anything's setup
        ("from tools.sample import sample\ndef run():\n    return sample()\n", "warning"),
    ],
)
def test_a_module_only_untrained_programs_import_gets_information(
    tmp_path, runner: str, severity: str
) -> None:
    from torchdoctor.static import LintConfig, lint

    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "tools" / "sample.py").write_text(
        "import torch\n"
        "def sample():\n"
        "    torch.backends.cudnn.deterministic = True\n"
        "    torch.backends.cudnn.benchmark = True\n"
        "    return torch.nn.Linear(2, 2)\n",
        encoding="utf-8",
    )
    (tmp_path / "run_net.py").write_text(runner, encoding="utf-8")
    [found] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD705")
    assert found.severity.value == severity


_SPAWNED_WORKERS = """
import torch
import torch.multiprocessing as mp


def main(gpu, config):
    {worker}
    model = torch.nn.Conv2d(3, 8, 3).cuda(gpu)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(2, 3, 8, 8).cuda(gpu)).sum().backward()
    optimizer.step()


{module}
if __name__ == "__main__":
    {launcher}
    mp.spawn(main, nprocs=2, args=({{}},))
"""


@pytest.mark.parametrize(
    ("worker", "module", "launcher", "flagged"),
    [
        # Context-Aware-Consistency: the launcher's flag never reaches the workers
        (
            "torch.backends.cudnn.deterministic = True",
            "",
            "torch.backends.cudnn.benchmark = True",
            False,
        ),
        (
            "torch.backends.cudnn.benchmark = True",
            "",
            "torch.use_deterministic_algorithms(True)",
            False,
        ),
        # both in the workers, or module code every worker runs again on import
        (
            "torch.backends.cudnn.deterministic = True\n    torch.backends.cudnn.benchmark = True",
            "",
            "pass",
            True,
        ),
        (
            "torch.backends.cudnn.deterministic = True",
            "torch.backends.cudnn.benchmark = True",
            "pass",
            True,
        ),
    ],
)
def test_td705_flags_set_in_the_launcher_do_not_reach_spawned_workers(
    worker: str, module: str, launcher: str, flagged: bool
) -> None:
    source = _SPAWNED_WORKERS.format(worker=worker, module=module, launcher=launcher)
    assert bool(lint_codes(source, "TD705")) is flagged


_EVALUATION_SCRIPT = """
import torch
import torch.optim as optim
import torch.optim.lr_scheduler as lr_sched


class Scan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.cumsum(-1)

    @staticmethod
    def backward(ctx, grad):  # loss.backward() reaches here
        return grad.flip(-1).cumsum(-1).flip(-1)


def evaluate(model, loader):
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    {body}


if __name__ == "__main__":
    evaluate(torch.nn.Linear(2, 2), [])
"""


@pytest.mark.parametrize(
    ("body", "severity"),
    [
        # Relation-Shape-CNN's voting scripts, VMamba's validation helpers: imports, an
        # autograd.Function's backward and a comment show no training
        ("return [model(x) for x in loader]", Severity.INFO),
        # the file trains: an optimizer built, a backward pass
        ("optimizer = optim.SGD(model.parameters(), lr=0.1)", Severity.WARNING),
        ("model(torch.ones(2)).sum().backward()", Severity.WARNING),
    ],
)
def test_td705_imports_comments_and_autograd_functions_show_no_training(
    body: str, severity: Severity
) -> None:
    found = lint_findings(_EVALUATION_SCRIPT.format(body=body), "TD705")
    assert [f.severity for f in found] == [severity]
