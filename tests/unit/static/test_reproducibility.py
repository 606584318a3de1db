"""TD906 never-seeded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.static.helpers import lint_codes, lint_findings
from torchdoctor.findings import Applicability, Severity
from torchdoctor.static import LintConfig, lint

SCRIPT = """
import torch
{imports}

def main():
{setup}
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            optimizer.step()

if __name__ == "__main__":
    main()
"""


def td906(setup: str = "    pass", imports: str = "") -> list[tuple[str, int]]:
    return lint_codes(SCRIPT.format(setup=setup, imports=imports), "TD906", "TD001")


def test_an_unseeded_training_script_is_flagged_at_its_training_loop() -> None:
    (found,) = lint_findings(SCRIPT.format(setup="    pass", imports=""), "TD906")
    assert (found.location.line, found.severity) == (9, Severity.INFO)
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    (edit,) = found.fix.edits
    assert edit.start_line == 17 and edit.replacement.startswith("torch.manual_seed(0)\n")


def test_training_at_module_level_makes_a_script_too() -> None:
    source = """
    import torch
    for x, y in loader:
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
    """
    assert lint_codes(source, "TD906", "TD001") == [("TD906", 3)]


def test_an_epoch_loop_around_a_helper_is_the_training_loop() -> None:
    source = """
    def train_one_epoch(model, loader, optimizer):
        for x in loader:
            optimizer.zero_grad()
            model(x).backward()
            optimizer.step()
    if __name__ == "__main__":
        for epoch in range(5):
            train_one_epoch(model, loader, optimizer)
    """
    assert lint_codes(source, "TD906", "TD001") == [("TD906", 8)]


def test_every_usual_way_of_seeding_is_recognised() -> None:
    for setup, imports in (
        ("    torch.manual_seed(0)", ""),
        ("    torch.cuda.manual_seed_all(0)", ""),
        ("    random.seed(0)", "import random"),
        ("    np.random.seed(0)", "import numpy as np"),
        ("    L.seed_everything(42)", "import lightning as L"),
        ("    set_seed(args.seed)", "from transformers import set_seed"),
        ("    rng = np.random.default_rng(1234)", "import numpy as np"),
        ("    config = Config(seed=0)", ""),
    ):
        assert td906(setup, imports) == [], setup


def test_library_modules_are_quiet() -> None:
    source = """
    def fit(model, loader, optimizer, epochs):
        for epoch in range(epochs):
            for x in loader:
                optimizer.zero_grad()
                model(x).backward()
                optimizer.step()
    """
    assert lint_codes(source, "TD906", "TD001") == []


def test_scripts_that_do_not_train_are_quiet() -> None:
    source = """
    import torch
    def main():
        model = torch.load("m.pt", weights_only=False)
        for x in loader:
            print(model(x))
    if __name__ == "__main__":
        main()
    """
    assert lint_codes(source, "TD906", "TD001") == []


# --- seeded inside an imported helper -----------------------------------------------------


def project_td906(tmp_path: Path, helper_body: str) -> list[tuple[str, int]]:
    """A script that calls ``compute_init()`` from its project's ``common.py``."""
    (tmp_path / "common.py").write_text(
        "import torch\n\ndef _seed_all(seed):\n    torch.manual_seed(seed)\n\n"
        f"def compute_init():\n{helper_body}\n    return 'cpu'\n",
        encoding="utf-8",
    )
    script = SCRIPT.format(
        setup="    device = compute_init()", imports="from common import compute_init"
    )
    (tmp_path / "train.py").write_text(script, encoding="utf-8")
    report = lint(tmp_path, config=LintConfig(), select=["TD906"], jobs=1)
    return [(Path(f.location.path or "").name, f.location.line or 0) for f in report.findings]


def test_a_seed_set_inside_an_imported_helper_is_followed(tmp_path: Path) -> None:
    assert project_td906(tmp_path, "    torch.manual_seed(42)") == []
    assert project_td906(tmp_path, "    _seed_all(42)") == []


def test_an_imported_helper_that_does_not_seed_leaves_the_finding(tmp_path: Path) -> None:
    assert project_td906(tmp_path, "    torch.set_float32_matmul_precision('high')") == [
        ("train.py", 9)
    ]


def test_a_setup_helper_lint_cannot_read_is_trusted() -> None:
    assert td906("    device = compute_init()", "from nanolib.common import compute_init") == []
    assert td906("    device = get_device()", "from nanolib.common import get_device") == [
        ("TD906", 9)
    ]


def _setup_package(tmp_path: Path, helpers: int, seeding: int) -> None:
    """``lib.init()`` calling ``helpers`` functions of its module, one of which seeds."""
    package = tmp_path / "lib"
    package.mkdir()
    bodies = [
        f"def h{i:02d}():\n    " + ("torch.manual_seed(0)" if i == seeding else f"return {i}")
        for i in range(helpers)
    ]
    calls = "".join(f"    h{i:02d}()\n" for i in range(helpers))
    (package / "__init__.py").write_text(
        "import torch\n\n" + "\n\n".join(bodies) + f"\n\ndef init():\n{calls}",
        encoding="utf-8",
    )
    script = SCRIPT.format(setup="    lib.init()", imports="import lib")
    (tmp_path / "train.py").write_text(script, encoding="utf-8")


def test_a_seed_among_a_dozen_set_up_helpers_is_found(tmp_path: Path) -> None:
    # CrypTen's crypten.init() calls a dozen helpers; the seed sat beyond the first eight
    _setup_package(tmp_path, helpers=12, seeding=7)
    assert lint(tmp_path, config=LintConfig(), select=["TD906"], jobs=1).findings == []


@pytest.mark.slow
def test_what_is_read_behind_a_call_does_not_hang_on_hash_order(tmp_path: Path) -> None:
    # The called helpers are a set of names: read in set order, which ones fit under the
    # bound changed with PYTHONHASHSEED, and so did the finding.
    _setup_package(tmp_path, helpers=12, seeding=7)
    outputs = set()
    for seed in ("0", "1", "2", "8"):
        done = subprocess.run(
            [sys.executable, "-m", "torchdoctor.cli", "lint", str(tmp_path), "--isolated"]
            + ["--select", "TD906", "--format", "json", "--fail-on", "never"],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.add(json.dumps(json.loads(done.stdout)["findings"], sort_keys=True))
    assert len(outputs) == 1
