"""A one-class cross-entropy is named as the cause of a constant loss (TD308)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import torchdoctor  # noqa: E402


def train(outputs: int, loss_of: Callable[[Any, Any], Any], steps: int = 30) -> set[str]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, outputs))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch() as session:
        for _ in range(steps):
            x = torch.randn(32, 20)
            target = (x[:, 0] > 0).float().unsqueeze(1)
            loss = loss_of(model(x), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return session.report.codes()


@pytest.mark.parametrize(
    "loss_of",
    [
        lambda out, y: F.cross_entropy(out, y),
        lambda out, y: nn.CrossEntropyLoss()(out, y),
        lambda out, y: F.nll_loss(F.log_softmax(out, dim=1), torch.zeros(len(y), dtype=torch.long)),
    ],
    ids=["functional", "module", "nll-after-log-softmax"],
)
def test_one_class_cross_entropy_is_named_instead_of_its_symptoms(loss_of: Any) -> None:
    codes = train(1, loss_of)
    assert "TD308" in codes
    assert not {"TD210", "TD218", "TD614"} & codes  # no wrong explanation beside it


@pytest.mark.parametrize(
    ("outputs", "loss_of"),
    [
        (2, lambda out, y: F.cross_entropy(out, y.squeeze(1).long())),
        (1, lambda out, y: F.binary_cross_entropy_with_logits(out, y)),
        (3, lambda out, y: F.cross_entropy(out.unsqueeze(-1), y.long().expand(-1, 1))),
        (3, lambda out, y: F.nll_loss(F.log_softmax(out, dim=-1), y.squeeze(1).long())),
    ],
    ids=[
        "two-classes",
        "bce-on-one-logit",
        "per-position-with-three-classes",
        "log-softmax-on-the-last-dim",
    ],
)
def test_correct_losses_are_quiet(outputs: int, loss_of: Any) -> None:
    assert "TD308" not in train(outputs, loss_of)


# -- TD620: an optimizer of copies ------------------------------------------------------------


def classifier() -> Any:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))


def fit(model: Any, optimizer: Any, ema: Any = None, steps: int = 12) -> set[str]:
    with torchdoctor.watch() as session:
        for _ in range(steps):
            x = torch.randn(16, 8)
            loss = F.cross_entropy(model(x), (x[:, 0] > 0).long())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if ema is not None:
                with torch.no_grad():
                    for e, p in zip(ema.parameters(), model.parameters(), strict=True):
                        e.mul_(0.9).add_(p, alpha=0.1)
                    ema(x)
    return session.report.codes()


def test_an_optimizer_built_before_a_deepcopy_is_found_instead_of_its_symptoms() -> None:
    import copy

    torch.manual_seed(0)
    original = classifier()
    optimizer = torch.optim.Adam(original.parameters(), lr=1e-2)
    codes = fit(copy.deepcopy(original), optimizer)
    assert "TD620" in codes and not {"TD210", "TD601"} & codes


def test_a_layer_replaced_after_the_optimizer_is_found() -> None:
    torch.manual_seed(0)
    model = classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model[2] = nn.Linear(16, 3)
    assert "TD620" in fit(model, optimizer)


def test_an_ema_copy_beside_the_trained_model_is_quiet() -> None:
    import copy

    torch.manual_seed(0)
    model = classifier()
    ema = copy.deepcopy(model).requires_grad_(False)
    assert "TD620" not in fit(model, torch.optim.Adam(model.parameters(), lr=1e-2), ema)


def test_a_frozen_layer_left_out_of_the_optimizer_is_quiet() -> None:
    torch.manual_seed(0)
    model = classifier()
    model[0].requires_grad_(False)
    optimizer = torch.optim.SGD(model[2].parameters(), lr=0.1)
    assert "TD620" not in fit(model, optimizer)


# -- TD222: a target or teacher network that backward() runs through ------------------------


def q_learning(detach: bool, steps: int = 12) -> set[str]:
    import copy

    torch.manual_seed(0)
    online = classifier()
    target = copy.deepcopy(online)
    optimizer = torch.optim.Adam(online.parameters(), lr=1e-3)
    with torchdoctor.watch() as session:
        for _ in range(steps):
            states, next_states = torch.randn(16, 8), torch.randn(16, 8)
            if detach:
                with torch.no_grad():
                    best_next = target(next_states).max(1).values
            else:
                best_next = target(next_states).max(1).values
            loss = F.smooth_l1_loss(online(states).max(1).values, 1.0 + 0.9 * best_next)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return session.report.codes()


def distill(no_grad: bool, steps: int = 12) -> set[str]:
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3)).eval()
    student = nn.Linear(8, 3)
    optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
    with torchdoctor.watch() as session:
        for _ in range(steps):
            x = torch.randn(16, 8)
            if no_grad:
                with torch.no_grad():
                    soft = teacher(x).softmax(1)
            else:
                soft = teacher(x).softmax(1)
            loss = F.kl_div(student(x).log_softmax(1), soft, reduction="batchmean")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return session.report.codes()


def test_a_target_network_with_its_graph_in_the_loss_is_found() -> None:
    codes = q_learning(detach=False)
    assert "TD222" in codes and "TD601" not in codes


def test_a_target_network_under_no_grad_is_quiet() -> None:
    assert "TD222" not in q_learning(detach=True)


def test_a_teacher_in_eval_mode_with_its_graph_in_the_loss_is_found() -> None:
    assert "TD222" in distill(no_grad=False)


def test_a_teacher_under_no_grad_is_quiet() -> None:
    assert "TD222" not in distill(no_grad=True)


class _WordModel(nn.Module):
    """An LSTM language model, the shape of pytorch/examples' word_language_model."""

    def __init__(self, vocab: int = 50) -> None:
        super().__init__()
        self.encoder = nn.Embedding(vocab, 16)
        self.rnn = nn.LSTM(16, 32)
        self.decoder = nn.Linear(32, vocab)

    def forward(self, tokens: Any) -> Any:
        output, _ = self.rnn(self.encoder(tokens))
        return F.log_softmax(self.decoder(output), dim=-1)


def _sgd_by_hand(model: Any, lr: float) -> None:
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)


def word_language_model(update: bool, epochs: int = 3) -> set[str]:
    """Plain SGD written by hand (no optimizer), evaluation in eval mode after each epoch:
    with ``update=False`` the model is a teacher that nothing changes."""
    torch.manual_seed(0)
    corpus = torch.randint(0, 50, (400,))
    model = _WordModel()
    with torchdoctor.watch() as session:
        for _ in range(epochs):
            model.train()
            for start in range(0, 300, 20):
                data = corpus[start : start + 20].view(10, 2)
                target = corpus[start + 1 : start + 21].view(-1)
                model.zero_grad()
                loss = F.nll_loss(model(data).view(-1, 50), target)
                loss.backward()
                if update:
                    _sgd_by_hand(model, lr=0.5)
            model.eval()
            with torch.no_grad():
                F.nll_loss(model(corpus[300:320].view(10, 2)).view(-1, 50), corpus[301:321])
    return session.report.codes()


def test_a_model_trained_by_hand_written_updates_is_not_a_teacher() -> None:
    assert "TD222" not in word_language_model(update=True)


def test_an_eval_mode_model_that_gets_gradients_and_never_changes_is_a_teacher() -> None:
    # The same loop without the update: backward() fills gradients nothing consumes.
    assert "TD222" in word_language_model(update=False)


# -- TD209: a loss cut off from the model ---------------------------------------------------


def _item_round_trip(model: Any, x: Any, y: Any) -> Any:
    return torch.tensor(F.cross_entropy(model(x), y).item(), requires_grad=True)


def _detached_output(model: Any, x: Any, y: Any) -> Any:
    return F.cross_entropy(model(x).detach().requires_grad_(), y)


def _no_grad_forward(model: Any, x: Any, y: Any) -> Any:
    with torch.no_grad():
        out = model(x)
    return F.cross_entropy(out, y).requires_grad_()


def _labels_only(model: Any, x: Any, y: Any) -> Any:
    scores = y.float().requires_grad_()
    return F.mse_loss(scores, y.float() * 0.5)


def _correct(model: Any, x: Any, y: Any) -> Any:
    return F.cross_entropy(model(x), y)


def _detached_auxiliary_term(model: Any, x: Any, y: Any) -> Any:
    out = model(x)
    return F.cross_entropy(out, y) + 0.1 * out.detach().pow(2).mean()


def cut_run(loss_of: Callable[[Any, Any, Any], Any], steps: int = 12) -> Any:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch() as session:
        for _ in range(steps):
            x = torch.randn(32, 20)
            loss = loss_of(model, x, (x[:, 0] > 0).long())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return session.report


@pytest.mark.parametrize(
    ("loss_of", "cause"),
    [
        (_item_round_trip, "leaf-loss"),
        (_detached_output, "no-parameter-reached"),
        (_no_grad_forward, "leaf-loss"),
        (_labels_only, "no-parameter-reached"),
    ],
    ids=["item-round-trip", "detached-output", "no-grad-forward", "labels-only"],
)
def test_a_loss_cut_from_the_model_is_named_instead_of_its_symptoms(
    loss_of: Any, cause: str
) -> None:
    report = cut_run(loss_of)
    found = report.by_code("TD209")
    assert len(found) == 1
    assert found[0].evidence["cause"] == cause
    assert found[0].evidence["cut_backward_calls"] >= 2
    assert not {"TD210", "TD218", "TD614", "TD208"} & report.codes()


def test_a_forward_under_no_grad_is_named_as_measured() -> None:
    found = cut_run(_no_grad_forward).by_code("TD209")
    assert found[0].evidence["no_grad_forward"] == "Sequential"
    assert "torch.no_grad()" in found[0].message


@pytest.mark.parametrize(
    "loss_of", [_correct, _detached_auxiliary_term], ids=["correct", "detached-auxiliary-term"]
)
def test_losses_that_reach_the_model_are_quiet(loss_of: Any) -> None:
    assert "TD209" not in cut_run(loss_of).codes()


def test_a_gan_whose_discriminator_sees_a_detached_fake_is_quiet() -> None:
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
    disc = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
    ones, zeros = torch.ones(16, 1), torch.zeros(16, 1)
    with torchdoctor.watch() as session:
        for _ in range(12):
            real = torch.randn(16, 8) + 2.0
            fake = gen(torch.randn(16, 4))
            opt_d.zero_grad()
            loss_d = F.binary_cross_entropy_with_logits(disc(real), ones)
            loss_d = loss_d + F.binary_cross_entropy_with_logits(disc(fake.detach()), zeros)
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            loss_g = F.binary_cross_entropy_with_logits(disc(fake), ones)
            loss_g.backward()
            opt_g.step()
    assert "TD209" not in session.report.codes()


def test_manual_tensors_trained_without_a_module_are_quiet() -> None:
    torch.manual_seed(0)
    weight = torch.zeros(20, 2, requires_grad=True)
    optimizer = torch.optim.SGD([weight], lr=0.1)
    with torchdoctor.watch() as session:
        for _ in range(12):
            x = torch.randn(32, 20)
            loss = F.cross_entropy(x @ weight, (x[:, 0] > 0).long())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert "TD209" not in session.report.codes()


def test_input_gradients_of_a_frozen_model_are_quiet() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 2)).requires_grad_(False)
    with torchdoctor.watch() as session:
        for _ in range(6):
            x = torch.randn(8, 20, requires_grad=True)
            F.cross_entropy(model(x), torch.zeros(8, dtype=torch.long)).backward()
    assert "TD209" not in session.report.codes()
