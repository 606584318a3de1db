"""Which root cause explains which symptom, in one table.

A run with a root cause (a one-class loss, a loss cut from the model, an optimizer of
copies, gradients never cleared) shows symptoms too (zero gradients, parameters that
never change, exploding gradients). The report should name the cause, not its echoes: a
symptom's detector asks this table, in its ``on_finish``, whether the report already holds
a cause that explains it, and where.

Each row says: findings of ``cause`` explain findings of ``symptoms`` within ``scope``:

* :attr:`Scope.RUN`: anywhere in the run;
* :attr:`Scope.OPTIMIZER` / :attr:`Scope.MODEL`: of the optimizer / model the cause names
  in its evidence (``evidence["optimizer"]`` / ``evidence["model"]``);
* :attr:`Scope.LINE`: at the source line of the cause's location;

and, when ``when`` is set, only the cause's findings it accepts. The cause's detector
must run first (:mod:`torchdoctor.runtime.detectors` lists the modules in that order; a
test holds it).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from torchdoctor.findings import Finding, Report

__all__ = [
    "EXPLAINS",
    "Explains",
    "Scope",
    "explained",
    "explained_lines",
    "explained_names",
]


class Scope(enum.Enum):
    """How far a cause's explanation reaches."""

    RUN = "run"
    OPTIMIZER = "optimizer"
    MODEL = "model"
    LINE = "line"


def cut_while_training(cause: Finding) -> bool:
    """A loss measured cut from the model on several backward calls (TD209 of the
    runtime detector), not a run that died in backward() (TD209 of the explainer)."""
    return "cut_backward_calls" in cause.evidence


@dataclass(frozen=True, slots=True)
class Explains:
    """One row: ``cause`` explains ``symptoms`` within ``scope`` (see the module doc)."""

    cause: str
    symptoms: tuple[str, ...]
    scope: Scope
    why: str
    when: Callable[[Finding], bool] | None = None

    def accepts(self, cause: Finding) -> bool:
        return self.when is None or self.when(cause)


_LOSS_CURVE = ("TD612", "TD613", "TD614")

EXPLAINS: tuple[Explains, ...] = (
    Explains("TD308", ("TD210", "TD218"), Scope.RUN, "a one-class loss: every gradient is 0"),
    Explains(
        "TD209",
        ("TD210", "TD218"),
        Scope.RUN,
        "the loss reaches no parameter",
        when=cut_while_training,
    ),
    Explains("TD620", ("TD210", "TD601"), Scope.RUN, "the optimizer steps copies"),
    Explains("TD222", ("TD601",), Scope.MODEL, "a target network, meant to stay fixed"),
    Explains("TD215", ("TD218", "TD606"), Scope.OPTIMIZER, "vanishing gradients"),
    Explains("TD201", ("TD216",), Scope.OPTIMIZER, "gradients never cleared add up"),
    Explains("TD308", _LOSS_CURVE, Scope.LINE, "a one-class loss stays constant"),
    Explains("TD209", _LOSS_CURVE, Scope.LINE, "a loss cut from the model cannot fall"),
)


def _causes(report: Report, symptoms: Iterable[str], scope: Scope) -> list[Finding]:
    wanted = set(symptoms)
    found = []
    for row in EXPLAINS:
        if row.scope is scope and wanted & set(row.symptoms):
            found += [f for f in report.by_code(row.cause) if row.accepts(f)]
    return found


def explained(report: Report, symptom: str) -> bool:
    """Whether a cause in ``report`` explains every ``symptom`` finding of the run."""
    return bool(_causes(report, (symptom,), Scope.RUN))


def explained_names(report: Report, symptom: str, scope: Scope) -> set[str]:
    """The optimizers or models (``scope``) whose ``symptom`` a cause in ``report``
    explains, by the name the cause gives in its evidence."""
    return {str(f.evidence.get(scope.value)) for f in _causes(report, (symptom,), scope)}


def explained_lines(report: Report, *symptoms: str) -> set[int | None]:
    """The source lines where a cause in ``report`` explains ``symptoms``."""
    return {f.location.line for f in _causes(report, symptoms, Scope.LINE)}
