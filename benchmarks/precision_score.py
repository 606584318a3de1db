"""Score lint's precision on a round's test set of real code bases from the committed verdicts.

Each round's test set is code read only to measure, never to tune rules: each code base is
named with the commit that was read (round 1: ``benchmarks/precision/repos.csv``, then
``repos_round2.csv`` ... ``repos_round114.csv``). Every error and warning lint gave there
was read at its line and judged (``test_set.csv``, ``test_set_round2.csv`` ...
``test_set_round114.csv``):

* ``worth``: true, and a maintainer would change it;
* ``minor``: true, but a maintainer would not bother;
* ``false``: the claim is wrong.

This script lints each code base afresh with the current code, matches every error and
warning to its verdict by (repository, path, line, code), and prints per severity the
counts by verdict, warnings per 1,000 lines and the share of warnings worth fixing.
A finding with no verdict is counted as ``unjudged`` and listed, so a new finding must be
read and judged before the figures mean anything.

Usage::

    python benchmarks/precision_score.py ROOT [--round 1|2|...|114]

where ``ROOT/<folder>`` holds each code base's ``.py`` files at the listed commit, e.g.
``git --git-dir=<mirror> archive <commit> | tar -x -C ROOT/<folder>`` (for
pytorch_geometric only ``examples/`` and ``benchmark/`` are linted). ``--round`` picks the
round (default: the latest, 114). A round's findings fixed later become tuning data: its
figures then show how the fixes did on code they were read from, not how lint does on
unseen code; the latest round is the measure.
"""

from __future__ import annotations

import argparse
import csv
import sys
import warnings
from collections import Counter
from pathlib import Path

from torchdoctor.findings import Finding, Severity
from torchdoctor.static import LintConfig, lint
from torchdoctor.static.config import DEFAULT_EXCLUDE

HERE = Path(__file__).resolve().parent / "precision"
VERDICTS = ("worth", "minor", "false", "unjudged")
Key = tuple[str, str, int, str]
# Each round's (code bases, verdicts) files.
ROUNDS = {
    1: ("repos.csv", "test_set.csv"),
    2: ("repos_round2.csv", "test_set_round2.csv"),
    3: ("repos_round3.csv", "test_set_round3.csv"),
    4: ("repos_round4.csv", "test_set_round4.csv"),
    5: ("repos_round5.csv", "test_set_round5.csv"),
    6: ("repos_round6.csv", "test_set_round6.csv"),
    7: ("repos_round7.csv", "test_set_round7.csv"),
    8: ("repos_round8.csv", "test_set_round8.csv"),
    9: ("repos_round9.csv", "test_set_round9.csv"),
    10: ("repos_round10.csv", "test_set_round10.csv"),
    11: ("repos_round11.csv", "test_set_round11.csv"),
    12: ("repos_round12.csv", "test_set_round12.csv"),
    13: ("repos_round13.csv", "test_set_round13.csv"),
    14: ("repos_round14.csv", "test_set_round14.csv"),
    15: ("repos_round15.csv", "test_set_round15.csv"),
    16: ("repos_round16.csv", "test_set_round16.csv"),
    17: ("repos_round17.csv", "test_set_round17.csv"),
    18: ("repos_round18.csv", "test_set_round18.csv"),
    19: ("repos_round19.csv", "test_set_round19.csv"),
    20: ("repos_round20.csv", "test_set_round20.csv"),
    21: ("repos_round21.csv", "test_set_round21.csv"),
    22: ("repos_round22.csv", "test_set_round22.csv"),
    23: ("repos_round23.csv", "test_set_round23.csv"),
    24: ("repos_round24.csv", "test_set_round24.csv"),
    25: ("repos_round25.csv", "test_set_round25.csv"),
    26: ("repos_round26.csv", "test_set_round26.csv"),
    27: ("repos_round27.csv", "test_set_round27.csv"),
    28: ("repos_round28.csv", "test_set_round28.csv"),
    29: ("repos_round29.csv", "test_set_round29.csv"),
    30: ("repos_round30.csv", "test_set_round30.csv"),
    31: ("repos_round31.csv", "test_set_round31.csv"),
    32: ("repos_round32.csv", "test_set_round32.csv"),
    33: ("repos_round33.csv", "test_set_round33.csv"),
    34: ("repos_round34.csv", "test_set_round34.csv"),
    35: ("repos_round35.csv", "test_set_round35.csv"),
    36: ("repos_round36.csv", "test_set_round36.csv"),
    37: ("repos_round37.csv", "test_set_round37.csv"),
    38: ("repos_round38.csv", "test_set_round38.csv"),
    39: ("repos_round39.csv", "test_set_round39.csv"),
    40: ("repos_round40.csv", "test_set_round40.csv"),
    41: ("repos_round41.csv", "test_set_round41.csv"),
    42: ("repos_round42.csv", "test_set_round42.csv"),
    43: ("repos_round43.csv", "test_set_round43.csv"),
    44: ("repos_round44.csv", "test_set_round44.csv"),
    45: ("repos_round45.csv", "test_set_round45.csv"),
    46: ("repos_round46.csv", "test_set_round46.csv"),
    47: ("repos_round47.csv", "test_set_round47.csv"),
    48: ("repos_round48.csv", "test_set_round48.csv"),
    49: ("repos_round49.csv", "test_set_round49.csv"),
    50: ("repos_round50.csv", "test_set_round50.csv"),
    51: ("repos_round51.csv", "test_set_round51.csv"),
    52: ("repos_round52.csv", "test_set_round52.csv"),
    53: ("repos_round53.csv", "test_set_round53.csv"),
    54: ("repos_round54.csv", "test_set_round54.csv"),
    55: ("repos_round55.csv", "test_set_round55.csv"),
    56: ("repos_round56.csv", "test_set_round56.csv"),
    57: ("repos_round57.csv", "test_set_round57.csv"),
    58: ("repos_round58.csv", "test_set_round58.csv"),
    59: ("repos_round59.csv", "test_set_round59.csv"),
    60: ("repos_round60.csv", "test_set_round60.csv"),
    61: ("repos_round61.csv", "test_set_round61.csv"),
    62: ("repos_round62.csv", "test_set_round62.csv"),
    63: ("repos_round63.csv", "test_set_round63.csv"),
    64: ("repos_round64.csv", "test_set_round64.csv"),
    65: ("repos_round65.csv", "test_set_round65.csv"),
    66: ("repos_round66.csv", "test_set_round66.csv"),
    67: ("repos_round67.csv", "test_set_round67.csv"),
    68: ("repos_round68.csv", "test_set_round68.csv"),
    69: ("repos_round69.csv", "test_set_round69.csv"),
    70: ("repos_round70.csv", "test_set_round70.csv"),
    71: ("repos_round71.csv", "test_set_round71.csv"),
    72: ("repos_round72.csv", "test_set_round72.csv"),
    73: ("repos_round73.csv", "test_set_round73.csv"),
    74: ("repos_round74.csv", "test_set_round74.csv"),
    75: ("repos_round75.csv", "test_set_round75.csv"),
    76: ("repos_round76.csv", "test_set_round76.csv"),
    77: ("repos_round77.csv", "test_set_round77.csv"),
    78: ("repos_round78.csv", "test_set_round78.csv"),
    79: ("repos_round79.csv", "test_set_round79.csv"),
    80: ("repos_round80.csv", "test_set_round80.csv"),
    81: ("repos_round81.csv", "test_set_round81.csv"),
    82: ("repos_round82.csv", "test_set_round82.csv"),
    83: ("repos_round83.csv", "test_set_round83.csv"),
    84: ("repos_round84.csv", "test_set_round84.csv"),
    85: ("repos_round85.csv", "test_set_round85.csv"),
    86: ("repos_round86.csv", "test_set_round86.csv"),
    87: ("repos_round87.csv", "test_set_round87.csv"),
    88: ("repos_round88.csv", "test_set_round88.csv"),
    89: ("repos_round89.csv", "test_set_round89.csv"),
    90: ("repos_round90.csv", "test_set_round90.csv"),
    91: ("repos_round91.csv", "test_set_round91.csv"),
    92: ("repos_round92.csv", "test_set_round92.csv"),
    93: ("repos_round93.csv", "test_set_round93.csv"),
    94: ("repos_round94.csv", "test_set_round94.csv"),
    95: ("repos_round95.csv", "test_set_round95.csv"),
    96: ("repos_round96.csv", "test_set_round96.csv"),
    97: ("repos_round97.csv", "test_set_round97.csv"),
    98: ("repos_round98.csv", "test_set_round98.csv"),
    99: ("repos_round99.csv", "test_set_round99.csv"),
    100: ("repos_round100.csv", "test_set_round100.csv"),
    101: ("repos_round101.csv", "test_set_round101.csv"),
    102: ("repos_round102.csv", "test_set_round102.csv"),
    103: ("repos_round103.csv", "test_set_round103.csv"),
    104: ("repos_round104.csv", "test_set_round104.csv"),
    105: ("repos_round105.csv", "test_set_round105.csv"),
    106: ("repos_round106.csv", "test_set_round106.csv"),
    107: ("repos_round107.csv", "test_set_round107.csv"),
    108: ("repos_round108.csv", "test_set_round108.csv"),
    109: ("repos_round109.csv", "test_set_round109.csv"),
    110: ("repos_round110.csv", "test_set_round110.csv"),
    111: ("repos_round111.csv", "test_set_round111.csv"),
    112: ("repos_round112.csv", "test_set_round112.csv"),
    113: ("repos_round113.csv", "test_set_round113.csv"),
    114: ("repos_round114.csv", "test_set_round114.csv"),
}


def read_rows(name: str) -> list[dict[str, str]]:
    """The rows of one of the committed CSV files."""
    with open(HERE / name, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def judged(name: str) -> dict[Key, str]:
    """Each judged finding's verdict in the file ``name``, keyed by (repo, path, line, code)."""
    return {
        (row["repo"], row["path"], int(row["line"]), row["code"]): row["verdict"]
        for row in read_rows(name)
    }


def lint_folder(folder: Path) -> list[Finding]:
    """Errors and warnings of one code base, with the isolated default config."""
    config = LintConfig(exclude=DEFAULT_EXCLUDE, respect_gitignore=False)
    report = lint(folder, config=config, jobs=1)
    return [f for f in report.findings if f.severity >= Severity.WARNING]


def relative(found: Finding, folder: Path) -> str:
    """The finding's path inside its code base, with forward slashes."""
    path = Path(found.location.path or "")
    try:
        return path.resolve().relative_to(folder.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def main(argv: list[str] | None = None) -> int:
    """Print the test set's figures; exit 1 when a finding has no verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="folder holding one sub-folder per code base")
    parser.add_argument("--round", type=int, choices=sorted(ROUNDS), default=max(ROUNDS))
    parser.add_argument(
        "--by-code", action="store_true", help="also print each rule's counts by verdict"
    )
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    repos_file, verdicts_file = ROUNDS[args.round]
    verdicts = judged(verdicts_file)
    counts: dict[Severity, Counter[str]] = {Severity.ERROR: Counter(), Severity.WARNING: Counter()}
    by_code: dict[tuple[str, Severity], Counter[str]] = {}
    unjudged: list[str] = []
    total_lines = 0
    repos = read_rows(repos_file)
    for row in repos:
        folder = args.root / row["folder"]
        if not folder.is_dir():
            parser.error(f"{folder} is missing: extract {row['repo']} at {row['commit']}")
        total_lines += int(row["lines"])
        for found in lint_folder(folder):
            key = (row["repo"], relative(found, folder), found.location.line or 0, found.code)
            verdict = verdicts.get(key, "unjudged")
            counts[found.severity][verdict] += 1
            by_code.setdefault((found.code, found.severity), Counter())[verdict] += 1
            if verdict == "unjudged":
                unjudged.append(f"  {row['repo']} {key[1]}:{key[2]} {key[3]} {found.message}")
    print(f"test set, round {args.round}: {len(repos)} code bases, {total_lines:,} lines")
    for severity, tally in counts.items():
        shown = ", ".join(f"{tally[v]} {v}" for v in VERDICTS)
        print(f"  {severity.value:<8} {sum(tally.values()):4d}  ({shown})")
    warned = counts[Severity.WARNING]
    total = sum(warned.values())
    print(f"  warnings per 1,000 lines: {1000.0 * total / total_lines:.3f}")
    if total:
        print(f"  warnings worth fixing: {warned['worth']}/{total} = {warned['worth'] / total:.2f}")
    if args.by_code:
        for (code, severity), tally in sorted(by_code.items(), key=lambda item: item[0]):
            shown = ", ".join(f"{tally[v]} {v}" for v in VERDICTS if tally[v])
            print(f"    {code} {severity.value:<8} {sum(tally.values()):3d}  ({shown})")
    if unjudged:
        print(f"findings with no verdict (read and judge them in {verdicts_file}):")
        print("\n".join(unjudged))
    return 1 if unjudged else 0


if __name__ == "__main__":
    sys.exit(main())
