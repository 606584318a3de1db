"""TD913 argparse-type-bool: a command-line flag whose text goes through bool()."""

from __future__ import annotations

from tests.unit.static.helpers import lint_codes, lint_findings
from torchdoctor.findings import Severity


def test_type_bool_is_a_warning_with_a_true_default_and_information_otherwise() -> None:
    source = """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--eval", type=bool, default=True)
        parser.add_argument("--augment", type=bool, default=False)
        parser.add_argument("--flip", default=1, type=bool)
        parser.add_argument("--sgd", action="store_true")
        parser.add_argument("--lr", type=float, default=0.1)
        parser.add_argument("--amp", action=argparse.BooleanOptionalAction, default=True)
        """
    found = {f.location.line: f for f in lint_findings(source, "TD913")}
    assert sorted(found) == [4, 5, 6]
    assert found[4].severity is Severity.WARNING and found[6].severity is Severity.WARNING
    assert found[5].severity is Severity.INFO
    assert "`--eval False` leaves it on" in found[4].message


def test_a_bool_that_is_not_the_builtin_or_not_argparse_stays_quiet() -> None:
    source = """
        from flags import bool
        parser.add_argument("--eval", type=bool, default=True)
        """
    assert lint_codes(source, "TD913") == []
    assert lint_codes("x = dict(type=bool, default=True)\n", "TD913") == []
