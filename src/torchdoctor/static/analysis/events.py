"""One model of a training loop's events, its two views, and the one way of following calls.

The model is :class:`~torchdoctor.static.training.EventKind`: what one call or statement
does to training state, as :func:`~torchdoctor.static.training.classify` reads it
(``loop_events``/``function_events`` list a loop's or a function's events). Two analyses
look at a body through a narrower view of the same events, each following calls into the
file's own helpers with :func:`helper_to_follow`:

==========================  ===========================  ==============================
``EventKind``               step view (:data:`STEP_VIEW`  mode view (:data:`MODE_VIEW`,
                            , :mod:`.step_sequences`)     :mod:`.mode_actions`)
==========================  ===========================  ==============================
``BACKWARD``                ``Kind.BACKWARD``            ``BACKWARD``
``OPTIMIZER_STEP``          ``Kind.STEP``                ``BACKWARD`` (training ran)
``ZERO_GRAD``               ``Kind.ZERO_GRAD``           not seen
``SCHEDULER_STEP``          ``Kind.SCHEDULER``           not seen
``EVAL``/``TRAIN``          not seen                     the same kind
``SET_MODE``                not seen                     ``SET_MODE``
``FORWARD``                 not seen                     ``FORWARD``
gradient clipping           ``Kind.CLIP`` (its own)      not seen
==========================  ===========================  ==============================

Gradient clipping is not an ``EventKind``: only the step view needs it, and it recognises
the calls itself (:data:`torchdoctor.static.torchapi.CLIP_GRAD_NORM`, launchers'
``clip_grad_norm_``). A rule picks the view that sees what it judges; a new kind of event
goes into ``EventKind`` first and into a view through its table here.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Container

from torchdoctor.static.analysis.callers import called_function
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import FunctionScope
from torchdoctor.static.training import EventKind

__all__ = ["MAX_CALL_DEPTH", "MODE_KINDS", "MODE_VIEW", "STEP_VIEW", "Kind", "helper_to_follow"]

# How many calls deep an analysis follows the file's own functions from a body:
# ``train()`` -> ``self.step()`` -> ``self.optimizer_step()`` -> ``clip(model)``.
MAX_CALL_DEPTH = 3


class Kind(enum.Enum):
    """The step view: what an action does to gradients."""

    BACKWARD = "backward"
    STEP = "step"
    ZERO_GRAD = "zero_grad"
    CLIP = "clip"
    SCHEDULER = "scheduler"


STEP_VIEW = {
    EventKind.BACKWARD: Kind.BACKWARD,
    EventKind.OPTIMIZER_STEP: Kind.STEP,
    EventKind.ZERO_GRAD: Kind.ZERO_GRAD,
    EventKind.SCHEDULER_STEP: Kind.SCHEDULER,
}
MODE_KINDS = (EventKind.EVAL, EventKind.TRAIN, EventKind.SET_MODE)
MODE_VIEW = {
    **{kind: kind for kind in (*MODE_KINDS, EventKind.FORWARD, EventKind.BACKWARD)},
    EventKind.OPTIMIZER_STEP: EventKind.BACKWARD,
}


def helper_to_follow(
    ctx: FileContext,
    call: ast.Call,
    scope: Scope,
    depth: int,
    path: Container[int],
    *,
    instances: bool = False,
) -> FunctionScope | None:
    """The function of this file that ``call`` (made ``depth`` calls deep from the body
    being analysed) runs, when an analysis should read into it: the call resolves to one,
    the depth stays under :data:`MAX_CALL_DEPTH`, and it is not already on ``path`` (the
    ids of the functions being read, so that recursion stops).

    ``call`` resolves as ``f()`` or ``self.f()`` (:meth:`FileContext.resolve_local_call`);
    with ``instances``, also as ``obj.f()`` on an instance of a class of this file
    (:func:`~.callers.called_function`).
    """
    if depth >= MAX_CALL_DEPTH:
        return None
    callee = called_function(ctx, call, scope) if instances else ctx.resolve_local_call(call, scope)
    if callee is None or id(callee) in path:
        return None
    return callee
