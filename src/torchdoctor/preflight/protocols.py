"""What the shared passes read of a check's context, as small typed protocols.

The training pass (:mod:`~torchdoctor.preflight.passes`), the explanations of its failures
(:mod:`~torchdoctor.preflight.explain`) and the copies for training
(:mod:`~torchdoctor.preflight.training`) are computed *for*
:class:`~torchdoctor.preflight.context.CheckContext`, which caches their results. They
see only the few members declared here, so they do not import the context (that would be
an import circle) and a test can hand them any object that has these members.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from torchdoctor.preflight.batch import Batch

__all__ = ["FailureContext", "PassContext", "UserObjects"]


class UserObjects(Protocol):
    """The user's objects, as :func:`~torchdoctor.preflight.training.copy_for_training`
    copies them."""

    @property
    def model(self) -> Any:
        """The user's ``nn.Module``."""

    @property
    def loss_fn(self) -> Any:
        """The user's loss callable, ``loss_fn(output, targets)``."""

    @property
    def optimizer(self) -> Any:
        """The user's optimizer, or ``None``."""


class FailureContext(Protocol):
    """What the explanations of a failed forward or loss read."""

    @property
    def loss_fn(self) -> Any:
        """The user's loss callable."""

    @property
    def batch(self) -> Batch:
        """The first batch, split into inputs and targets, on the check's device."""

    def name(self, path: str) -> str:
        """A module path for messages (the root module shows as its class name)."""


class PassContext(UserObjects, FailureContext, Protocol):
    """What the shared training pass reads: the objects, the batch, the seed, and which
    rules are enabled."""

    @property
    def seed(self) -> int:
        """The seed set before every forward the check runs."""

    def enabled(self, code: str) -> bool:
        """Whether findings of ``code`` will be reported."""
