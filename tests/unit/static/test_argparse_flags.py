"""TD913 argparse-type-bool: a command-line flag whose text goes through bool()."""

from __future__ import annotations

import pytest

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


def test_an_option_with_a_short_name_is_named_by_its_long_one() -> None:
    # Round 41's Coqui TTS: `"-t", "--trim_just_beginning_and_end"`.
    source = """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("-t", "--trim", type=bool, default=True)
        """
    (found,) = lint_findings(source, "TD913")
    assert "`--trim` is declared" in found.message and "`--trim False`" in found.message


def test_a_bool_that_is_not_the_builtin_or_not_argparse_stays_quiet() -> None:
    source = """
        from flags import bool
        parser.add_argument("--eval", type=bool, default=True)
        """
    assert lint_codes(source, "TD913") == []
    assert lint_codes("x = dict(type=bool, default=True)\n", "TD913") == []


_SCRIPT = """
import argparse
import utils
parser = argparse.ArgumentParser()
parser.add_argument("--distributed", type=bool, default=True)
parser.add_argument("--use_gpu", type=bool, default=True)
args = parser.parse_args()
args.use_gpu = True if utils.cuda() and args.use_gpu else False
utils.init_distributed_mode(args)
"""


def test_a_flag_the_program_overwrites_is_information(tmp_path) -> None:
    """``utils.init_distributed_mode(args)`` sets ``args.distributed`` from the
    environment: the flag's value changes nothing. Refining a flag from its own value
    (``args.use_gpu = cuda and args.use_gpu``) keeps it, and a sibling script's
    assignment belongs to another program."""
    from torchdoctor.static import LintConfig, lint

    (tmp_path / "train.py").write_text(_SCRIPT, encoding="utf-8")
    (tmp_path / "other.py").write_text(
        "import argparse\nargs = argparse.Namespace()\nargs.distributed = False\n",
        encoding="utf-8",
    )
    (tmp_path / "utils.py").write_text(
        "def cuda():\n    return False\n"
        "def init_distributed_mode(args):\n    args.distributed = False\n",
        encoding="utf-8",
    )

    def severities() -> dict[int, Severity]:
        report = lint(tmp_path, config=LintConfig(), jobs=1)
        return {f.location.line: f.severity for f in report.by_code("TD913")}

    assert severities() == {5: Severity.INFO, 6: Severity.WARNING}
    (tmp_path / "utils.py").write_text(
        "def cuda():\n    return False\ndef init_distributed_mode(args):\n    pass\n",
        encoding="utf-8",
    )
    assert severities() == {5: Severity.WARNING, 6: Severity.WARNING}


def test_an_objects_own_attribute_of_the_same_name_is_not_the_option(tmp_path) -> None:
    """EasyOCR: ``--detector`` is parsed by the CLI, and the imported Reader class sets
    ``self.detector = ...``, its own attribute: the option is not overwritten."""
    from torchdoctor.static import LintConfig, lint

    (tmp_path / "train.py").write_text(_SCRIPT, encoding="utf-8")
    (tmp_path / "utils.py").write_text(
        "def cuda():\n    return False\n"
        "class Reader:\n    def __init__(self):\n        self.distributed = False\n"
        "def init_distributed_mode(args):\n    pass\n",
        encoding="utf-8",
    )
    report = lint(tmp_path, config=LintConfig(), jobs=1)
    assert {f.location.line: f.severity for f in report.by_code("TD913")} == {
        5: Severity.WARNING,
        6: Severity.WARNING,
    }


def test_a_flag_with_a_store_false_twin_is_information() -> None:
    """Stable DreamFusion: ``--recenter`` is ``type=bool, default=True``, and
    ``--dont_recenter`` stores False into the same ``recenter``: the flag can be turned
    off from the command line after all. A twin that writes another attribute does not
    count."""
    source = """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--recenter", type=bool, default=True)
parser.add_argument("--dont_recenter", dest="recenter", action="store_false")
parser.add_argument("--normals", type=bool, default=True)
parser.add_argument("--no-depth", dest="depth", action="store_false")
"""
    found = {f.location.line: f for f in lint_findings(source, "TD913")}
    assert found[4].severity is Severity.INFO and "only `--dont_recenter`" in found[4].message
    assert found[6].severity is Severity.WARNING


_PARSED = """import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--random-start", default=True, type=bool)
parser.add_argument("--outdir", default="out")
args = parser.parse_args()
print(args.outdir)
{more}
"""


@pytest.mark.parametrize(
    ("more", "severity"),
    [
        ("", Severity.INFO),  # parsed and dropped: nothing reads .random_start
        ("attack(random_start=args.random_start)", Severity.WARNING),
        ("attack(getattr(args, 'random_start'))", Severity.WARNING),
        ("train(args)", Severity.WARNING),  # handed on whole: may be read there
        ("config = vars(args)", Severity.WARNING),
        ("config = args.__dict__", Severity.WARNING),
    ],
)
def test_a_flag_nothing_reads_is_information(more: str, severity: Severity) -> None:
    """smoothing-adversarial's ``--random-start``: parsed, and never read by the script,
    which reads its options attribute by attribute: the flag changes nothing."""
    (found,) = lint_findings(_PARSED.format(more=more), "TD913")
    assert found.severity is severity
    assert ("nothing in the program reads" in found.message) is (severity is Severity.INFO)


def test_options_parsed_where_lint_cannot_follow_them_keep_the_warning() -> None:
    for parse in ("return parser.parse_args()", "self.args = parser.parse_args()"):
        source = (
            "import argparse\n"
            "def options(self):\n"
            "    parser = argparse.ArgumentParser()\n"
            '    parser.add_argument("--cuda", default=True, type=bool)\n'
            f"    {parse}\n"
        )
        (found,) = lint_findings(source, "TD913")
        assert found.severity is Severity.WARNING, parse


_OWN_PARSER = """
import argparse


class ProjectParser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("type", "bool", lambda text: text.lower() in ("1", "true", "yes"))

    def add_argument(self, *args, **kwargs):
        if kwargs.get("type") is bool:
            kwargs["type"] = "bool"
        return super().add_argument(*args, **kwargs)
"""


@pytest.mark.parametrize(
    ("adding", "severity"),
    [
        # ParlAI: options added to a parser handed in, or to a group of one; the project's
        # parser class converts type=bool in its own add_argument
        (
            "def add_cmdline_args(parser):\n"
            "    group = parser.add_argument_group('Agent')\n"
            "    group.add_argument('--use-memory', type=bool, default=True)",
            Severity.INFO,
        ),
        (
            "parser = ProjectParser()\n"
            "parser.add_argument('--use-memory', type=bool, default=True)",
            Severity.INFO,
        ),
        # a plain argparse parser of the same project still reads "False" as true
        (
            "parser = argparse.ArgumentParser()\n"
            "parser.add_argument('--use-memory', type=bool, default=True)",
            Severity.WARNING,
        ),
    ],
)
def test_td913_a_parser_class_of_the_project_that_converts_the_type(
    adding: str, severity: Severity
) -> None:
    (found,) = lint_findings(_OWN_PARSER + adding, "TD913")
    assert found.severity is severity, found.message


def test_td913_without_a_converting_parser_in_the_project_a_parameter_still_warns() -> None:
    source = """
import argparse


def add_cmdline_args(parser):
    parser.add_argument("--use-memory", type=bool, default=True)
"""
    (found,) = lint_findings(source, "TD913")
    assert found.severity is Severity.WARNING
