"""Fresh-seed fuzzing of ``lint`` and ``--fix``: a new seed every run, named in the test id.

``test_lint_fuzz.py`` replays the same derandomised examples on every run (a regression
net). This module explores: each run draws a new seed (or takes
``TORCHDOCTOR_FUZZ_SEED=<n>`` to replay one), and the seed is part of every test id, so a
failure in a CI log reads ``test_...[seed=1234567]`` and is replayed with
``TORCHDOCTOR_FUZZ_SEED=1234567 python -m pytest tests/property/test_lint_fuzz_seeded.py``.

* 2,000 training-loop-shaped programs through ``lint`` (no internal error, deterministic);
  about 30 s of CPU on one core (``TORCHDOCTOR_FUZZ_PROGRAMS`` changes the count);
* a mutation fuzzer over the clean corpus and the lab programs: lines deleted, duplicated,
  swapped, re-indented or replaced by training statements; each mutant is linted, then
  fixed (safe fixes, then unsafe ones): a fix never turns parsable code into a syntax
  error, and fixing the fixed file again changes nothing (200 mutants, about 8 s of CPU;
  ``TORCHDOCTOR_FUZZ_MUTANTS``).
"""

from __future__ import annotations

import ast
import os
import random
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.property.test_lint_fuzz import _STATEMENTS, assert_lints_cleanly, training_programs
from torchdoctor.rules.selection import Selection
from torchdoctor.static.fixes import fix_file
from torchdoctor.static.runner import FileJob

SEED = int(os.environ.get("TORCHDOCTOR_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
PROGRAMS = int(os.environ.get("TORCHDOCTOR_FUZZ_PROGRAMS") or 2000)
MUTANTS = int(os.environ.get("TORCHDOCTOR_FUZZ_MUTANTS") or 200)
_ROOT = Path(__file__).resolve().parents[2]
_SEEDS = [pytest.param(SEED, id=f"seed={SEED}")]


def corpus_sources() -> list[str]:
    """The correct programs and the lab's buggy/fixed pairs: real shapes to mutate."""
    files = sorted((_ROOT / "tests" / "corpus" / "clean").glob("*.py"))
    files += sorted((_ROOT / "examples" / "lab").glob("*/*.py"))
    return [path.read_text(encoding="utf-8") for path in files]


@pytest.mark.slow
@pytest.mark.parametrize("fuzz_seed", _SEEDS)
def test_training_programs_with_a_fresh_seed(fuzz_seed: int) -> None:
    @seed(fuzz_seed)
    @settings(
        max_examples=PROGRAMS,
        deadline=None,
        derandomize=False,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(training_programs())
    def lints_cleanly(source: str) -> None:
        assert_lints_cleanly(source)

    lints_cleanly()


def mutate(source: str, rng: random.Random) -> str:
    """A few random line-level edits of ``source``."""
    lines = source.splitlines()
    for _ in range(rng.randint(1, 4)):
        if not lines:
            break
        index = rng.randrange(len(lines))
        action = rng.randrange(5)
        if action == 0:
            del lines[index]
        elif action == 1:
            lines.insert(index, lines[index])
        elif action == 2:
            other = rng.randrange(len(lines))
            lines[index], lines[other] = lines[other], lines[index]
        elif action == 3:
            indent = len(lines[index]) - len(lines[index].lstrip())
            lines[index] = " " * max(0, indent + rng.choice((-4, 4))) + lines[index].lstrip()
        else:
            indent = len(lines[index]) - len(lines[index].lstrip())
            lines[index] = " " * indent + rng.choice(_STATEMENTS)
    return "\n".join(lines) + "\n"


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _fixed(path: Path, text: str, unsafe: bool) -> str:
    path.write_text(text, encoding="utf-8")
    result = fix_file(FileJob(str(path)), Selection(), unsafe=unsafe)
    assert result is not None
    return result.fixed


@pytest.mark.slow
@pytest.mark.parametrize("fuzz_seed", _SEEDS)
def test_mutated_programs_lint_and_fix_cleanly(fuzz_seed: int, tmp_path: Path) -> None:
    rng = random.Random(fuzz_seed)
    sources = corpus_sources()
    path = tmp_path / "mutant.py"
    for number in range(MUTANTS):
        original = rng.choice(sources)
        mutant = mutate(original, rng)
        where = f"mutant {number} of seed {fuzz_seed}"
        assert_lints_cleanly(mutant)
        for unsafe in (False, True):
            fixed = _fixed(path, mutant, unsafe)
            if _parses(mutant):
                assert _parses(fixed), f"{where}: --fix broke the syntax:\n{fixed}"
            again = _fixed(path, fixed, unsafe)
            assert again == fixed, f"{where}: a second --fix changed the file again"
