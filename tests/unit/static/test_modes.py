"""TD501 eval-in-train-mode and TD502 train-in-eval-mode."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings
from torchdoctor.findings import Confidence
from torchdoctor.rules.selection import Selection
from torchdoctor.static import LintConfig, lint
from torchdoctor.static.fixes import fix_file
from torchdoctor.static.runner import FileJob

# --- TD501 eval-in-train-mode -----------------------------------------------------------


def test_td501_flags_an_evaluation_loop_without_eval() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.2), nn.Linear(8, 2))
        def forward(self, x):
            return self.body(x)
    def evaluate(model, loader):
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (model(x).argmax(1) == y).sum().item()  # expect: TD501
        return correct
    def main(loader):
        evaluate(Net(), loader)
    """,
        "TD501",
    )


# A functional learner (MAML-style): its normalisation and dropout take their mode from an
# argument, so the module's own mode, and eval(), change nothing in it.
_FUNCTIONAL_LEARNER = """
import torch
import torch.nn.functional as F
from torch import nn
class Learner(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(8, 4))
        self.gamma = nn.Parameter(torch.ones(8))
        self.beta = nn.Parameter(torch.zeros(8))
        self.register_buffer("mean", torch.zeros(8))
        self.register_buffer("var", torch.ones(8))
    def forward(self, x, bn_training=True, drop=False):
        x = F.linear(x, self.w)
        {norm}
        return x
def evaluate(net, loader):
    with torch.no_grad():
        for x, y in loader:
            net(x, bn_training=True)  {mark}
def main(loader):
    evaluate(Learner(), loader)
"""


@pytest.mark.parametrize(
    "norm",
    [
        "x = F.batch_norm(x, self.mean, self.var, self.gamma, self.beta, training=bn_training)",
        "x = F.batch_norm(x, self.mean, self.var, self.gamma, self.beta, bn_training)",
        "x = F.dropout(x, 0.1, training=drop)",
        "x = F.instance_norm(x, use_input_stats=True)",
        "x = torch.dropout(x, 0.1, drop)",
    ],
)
def test_td501_quiet_where_functional_layers_are_given_their_mode(norm: str) -> None:
    assert_marked(_FUNCTIONAL_LEARNER.format(norm=norm, mark=""), "TD501")


@pytest.mark.parametrize(
    "norm",
    [
        "x = F.batch_norm(x, self.mean, self.var, self.gamma, self.beta, training=self.training)",
        "x = F.dropout(x, 0.1, self.training)",
        "x = F.dropout(x, 0.1, training=self.training and drop)",
        "x = F.batch_norm(x, self.mean, self.var, self.gamma, self.beta)",
        "x = self.norm(x, self.training)\n    def norm(self, x, flag):\n"
        "        return F.batch_norm(x, self.mean, self.var, training=flag)",
    ],
)
def test_td501_flags_functional_layers_that_follow_the_modules_mode(norm: str) -> None:
    """The mode read from ``self.training`` (passed on, even to a helper method), or not
    given at all: the module's mode is what they run in."""
    source = _FUNCTIONAL_LEARNER.format(norm=norm, mark="# expect: TD501")
    assert_marked(source, "TD501")


def test_td501_quiet_when_the_model_is_not_shown() -> None:
    # Whether `model` has dropout or BatchNorm cannot be told: an error needs evidence.
    assert_marked(
        """
    import torch
    def evaluate(model, loader):
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (model(x).argmax(1) == y).sum().item()
        return correct
    """,
        "TD501",
    )


def test_td501_quiet_for_a_sequential_without_dropout_or_batchnorm() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    def evaluate(model, loader):
        with torch.no_grad():
            for x, y in loader:
                model(x)
    def main(loader):
        evaluate(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), loader)
    """,
        "TD501",
    )


_IMAGE_TRANSLATOR = """
import torch
from torch import nn
class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3), {norm}, nn.ReLU(), nn.Conv2d(8, 3, 3))
    def forward(self, x):
        return self.body(x)
class Solver:
    def __init__(self):
        self.G = Generator()
    def sample(self, fixed):
        with torch.no_grad():
            for x in fixed:
                self.G(x)  {mark}
"""


@pytest.mark.parametrize(
    "norm",
    [
        "nn.InstanceNorm2d(8, affine=True, track_running_stats=True)",
        "nn.InstanceNorm2d(8, 1e-5, 0.1, True, True)",
        "nn.InstanceNorm2d(8, affine=True)",
        "nn.LazyInstanceNorm2d(track_running_stats=True)",
    ],
)
def test_td501_quiet_for_instance_norm_which_training_mode_computes_exactly(norm: str) -> None:
    """An instance norm normalises each sample by its own statistics in training mode,
    as it did in training: sampling without eval() computes nothing wrong (eval() would
    even switch a tracking one to running averages)."""
    assert_marked(_IMAGE_TRANSLATOR.format(norm=norm, mark=""), "TD501")


@pytest.mark.parametrize("norm", ["nn.BatchNorm2d(8)", "nn.Dropout2d(0.5)"])
def test_td501_flags_the_same_sampler_with_batch_statistics_or_dropout(norm: str) -> None:
    source = _IMAGE_TRANSLATOR.format(norm=norm, mark="# expect: TD501")
    assert_marked(source, "TD501")


_DECORATED_SAMPLER = """
import torch
from torch import nn

def eval_decorator(fn):
    def inner(model, *args, **kwargs):
        was_training = model.training
        {switch}
        out = fn(model, *args, **kwargs)
        model.train(was_training)
        return out
    return inner

class TextModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1))

    @torch.no_grad()
    @eval_decorator
    def generate(self, tokens, steps):
        for _ in range(steps):
            tokens = self.transformer(tokens)  {mark}
        return tokens
"""


_TIMED_FORWARDS = """
    import time
    import torch
    from torch import nn
    def speed(inputs, loader):
        net = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Dropout(0.1))
        start = time.time()
        with torch.no_grad():
            {loop}
                out = net({inputs})
        print(time.time() - start)
    """


def test_td501_quiet_for_a_module_put_in_eval_mode_by_its_construction_chain() -> None:
    """Comprehensive-Transformer-TTS: ``Loss = TTSLoss(cfg).to(device).eval()``; a module
    built without ``.eval()`` in its chain is still flagged."""
    source = """
    import torch
    from torch import nn
    class TTSLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.1)
        def forward(self, x):
            return self.drop(x).mean()
    def evaluate(loader, device):
        Loss = TTSLoss().to(device).eval()
        other = TTSLoss().to(device)
        for x in loader:
            with torch.no_grad():
                a = Loss(x)
        for x in loader:
            with torch.no_grad():
                b = other(x)  # expect: TD501
    """
    assert_marked(source, "TD501")


def test_td501_is_information_in_a_loop_timing_one_forward() -> None:
    """DeepGCNs' architecture self-test: 1000 forwards of one random input under no_grad,
    timed; no metric comes out of it."""
    source = _TIMED_FORWARDS.format(loop="for i in range(1000):", inputs="inputs")
    [found] = lint_findings(source, "TD501")
    assert found.severity.value == "info" and "measures time or memory" in found.message


def test_td501_stays_an_error_in_a_timed_evaluation_over_data() -> None:
    source = _TIMED_FORWARDS.format(loop="for x in loader:", inputs="x")
    [found] = lint_findings(source, "TD501")
    assert found.severity.value == "error"


def test_td501_quiet_where_a_decorator_of_the_file_puts_the_model_in_eval_mode() -> None:
    """DALL-E's ``@eval_decorator`` calls ``model.eval()`` on the method's object before
    the sampling loop runs, and restores the mode after."""
    source = _DECORATED_SAMPLER.format(switch="model.eval()", mark="")
    assert_marked(source, "TD501")


def test_td501_flags_a_decorator_that_does_not_switch_the_mode() -> None:
    """On a sampler object that holds the network (not a module, whose users would set
    its mode), a decorator that never calls ``eval()`` proves nothing."""
    source = _DECORATED_SAMPLER.format(switch="pass", mark="# expect: TD501")
    assert_marked(source.replace("class TextModel(nn.Module):", "class TextModel:"), "TD501")


_EVALUATOR = """
import torch
from torch import nn

class Recogniser(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.2), nn.Linear(8, 4))
    def forward(self, x):
        return self.body(x)

class Evaluator:
    def __init__(self, path):
        model = Recogniser()
        model.load_state_dict(torch.load(path))
        {switch}
        self.model = model

    def features(self, loader):
        with torch.no_grad():
            for batch in loader:
                self.model(batch)  {mark}
{extra}
"""


def test_td501_quiet_for_a_model_its_evaluator_puts_in_eval_mode_when_built() -> None:
    """The motion-diffusion evaluator: ``__init__`` loads the recogniser, calls
    ``model.eval()`` and keeps it as ``self.model``; nothing trains it."""
    source = _EVALUATOR.format(switch="model.eval()", mark="", extra="")
    assert_marked(source, "TD501")


@pytest.mark.parametrize(
    ("switch", "extra"),
    [
        ("pass", ""),
        ("model.eval()", "    def finetune(self):\n        self.model.train()\n"),
    ],
)
def test_td501_flags_the_evaluator_when_eval_is_missing_or_undone(switch: str, extra: str) -> None:
    source = _EVALUATOR.format(switch=switch, mark="# expect: TD501", extra=extra)
    assert_marked(source, "TD501")


_FACTORY = """
import torch
from torch import nn

def initialize_model(path):
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.2), nn.Linear(8, 4))
    model.load_state_dict(torch.load(path))
    {switch}
    return model

def compute_features(model, loader):
    with torch.no_grad():
        for batch in loader:
            model(batch)  {mark}

def evaluate(path, loader):
    act_rec_model = initialize_model(path)
    return compute_features(act_rec_model, loader)
"""


def test_td501_quiet_for_a_model_a_local_factory_returns_in_eval_mode() -> None:
    assert_marked(_FACTORY.format(switch="model.eval()", mark=""), "TD501")


def test_td501_flags_the_factory_model_without_eval() -> None:
    assert_marked(_FACTORY.format(switch="pass", mark="# expect: TD501"), "TD501")


_SCRIPT_FACTORY = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.2), nn.Linear(8, 4))

    def forward(self, x):
        return self.body(x)

def load_model(path):
    model = Net()
    model.load_state_dict(torch.load(path))
    model = model.to("cpu")
    return {returned}

model = load_model("weights.pt")

def main(batches):
    with torch.no_grad():
        for batch in batches:
            model(batch)  {mark}

main([])
"""


def test_td501_quiet_for_a_module_level_model_a_factory_returns_with_eval() -> None:
    """Wav2Lip's inference scripts: ``model = load_model(path)`` at module level, where
    ``load_model`` ends with ``return model.eval()``; ``main()`` reads the global. The
    factory's own local ``model`` assignments are another name."""
    assert_marked(_SCRIPT_FACTORY.format(returned="model.eval()", mark=""), "TD501")
    assert_marked(_SCRIPT_FACTORY.format(returned="model", mark="# expect: TD501"), "TD501")


def test_td501_quiet_on_a_loss_and_a_generator_under_no_grad() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    def evaluate(model, loader, seed):
        model.eval()
        criterion = nn.CrossEntropyLoss()
        total = 0.0
        with torch.no_grad():
            for x, y in loader:
                noise = torch.Generator(device=x.device)
                total += criterion(model(x), y).item()
        return total
    """,
        "TD501",
    )


def test_td501_flags_when_the_caller_left_the_model_training() -> None:
    src = """
    import torch
    def validate(net, loader):
        with torch.inference_mode():
            for x, y in loader:
                net(x)  # expect: TD501
    def main(loader, opt):
        net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
        net.train()
        for x, y in loader:
            opt.zero_grad()
            net(x).sum().backward()
            opt.step()
        validate(net, loader)
    """
    assert_marked(src, "TD501")
    (found,) = lint_findings(src, "TD501")
    assert "training mode at line 9" in found.message
    assert found.confidence is Confidence.HIGH


def test_td501_flags_test_loop_after_training_in_the_same_function() -> None:
    assert_marked(
        """
    import torch
    def main(train_loader, test_loader, opt):
        model = torch.nn.LSTM(8, 8, 2, dropout=0.1)
        for x, y in train_loader:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
        with torch.no_grad():
            for x, y in test_loader:
                model(x)  # expect: TD501
    """,
        "TD501",
    )


def test_td501_without_visible_callers_has_medium_confidence() -> None:
    (found,) = lint_findings(
        """
    import torch
    model = torch.nn.Dropout(0.5)
    @torch.no_grad()
    def predict(batches):
        return [model(b) for b in batches] + [model(b) for b in range(3) for _ in [0]]
    def score(batches):
        with torch.no_grad():
            for b in batches:
                model(b)
    """,
        "TD501",
    )
    assert found.confidence is Confidence.MEDIUM
    assert "no caller of it is in this file" in found.message


_SAMPLER_METHOD = """
import torch
from torch import nn

class {owner}:
    def __init__(self):
        super().__init__()
        self.decoder = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1), nn.Linear(8, 8))

    @torch.no_grad()
    def generate(self, prompt, steps):
        out = prompt
        for _ in range(steps):
            out = self.decoder(out)  {mark}
        return out
"""


def test_td501_quiet_in_a_generate_method_of_the_model_itself() -> None:
    """x-transformers' ``FreeTransformer.generate``: a method of the model, called by
    no code of the file; the library's users set the model's mode before sampling."""
    assert_marked(_SAMPLER_METHOD.format(owner="Sampler(nn.Module)", mark=""), "TD501")


def test_td501_still_flags_the_method_of_a_plain_class_holding_the_model() -> None:
    """A trainer-like object (not a module) that runs its model under no_grad: nothing
    shows its mode is set, as for a function with no caller."""
    source = _SAMPLER_METHOD.format(owner="Sampler", mark="# expect: TD501")
    assert_marked(source.replace("super().__init__()", "pass"), "TD501")


def test_td501_quiet_in_a_model_whose_base_lint_cannot_resolve() -> None:
    """Round 41's XTTS: the model subclasses a trainer package's model class, which lint
    cannot read; overriding ``eval()`` with ``super().eval()`` (or calling
    ``self.parameters()``) shows it is a module, whose users set its mode. A trainer that
    keeps its own ``state_dict()`` for checkpoints is no module, and stays flagged."""
    header = "from trainer import TrainerModel\n"
    module = _SAMPLER_METHOD.format(owner="Xtts(TrainerModel)", mark="")
    overrides = module + "\n    def eval(self):\n        return super().eval()\n"
    assert_marked(header + overrides, "TD501")
    counts = (
        module + "\n    def size(self):\n        return sum(p.numel() for p in self.parameters())\n"
    )
    assert_marked(header + counts, "TD501")
    trainer = _SAMPLER_METHOD.format(owner="Trainer(Base)", mark="# expect: TD501")
    trainer += "\n    def save(self, path):\n        torch.save(self.state_dict(), path)\n"
    assert_marked(trainer.replace("super().__init__()", "pass"), "TD501")


def test_td501_quiet_with_eval_in_the_same_function() -> None:
    assert_marked(
        """
    import torch
    def evaluate(model, loader):
        model.eval()
        with torch.no_grad():
            for x, y in loader:
                model(x)
    """,
        "TD501",
    )


def test_td501_quiet_with_eval_two_calls_up() -> None:
    assert_marked(
        """
    import torch
    def run_eval(model, loader):
        with torch.no_grad():
            for x, y in loader:
                model(x)
    def validate(net, loader):
        return run_eval(net, loader)
    def main(net, loader):
        net.eval()
        validate(net, loader)
    """,
        "TD501",
    )


def test_td501_quiet_with_eval_in_a_method_caller() -> None:
    assert_marked(
        """
    import torch
    class Trainer:
        def __init__(self, model):
            self.model = model
        def _loop(self, loader):
            with torch.no_grad():
                for x, y in loader:
                    self.model(x)
        def validate(self, loader):
            self.model.eval()
            self._loop(loader)
            self.model.train()
    """,
        "TD501",
    )


def test_td501_quiet_for_train_false_and_runtime_mode() -> None:
    assert_marked(
        """
    import torch
    def evaluate(model, loader, training):
        model.train(False)
        with torch.no_grad():
            for x, y in loader:
                model(x)
    def evaluate2(model, loader, training):
        model.train(training)
        with torch.no_grad():
            for x, y in loader:
                model(x)
    """,
        "TD501",
    )


def test_td501_quiet_for_a_model_without_dropout_or_batchnorm() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)
        def forward(self, x):
            return torch.relu(self.fc(x))
    def evaluate(loader):
        model = Tiny()
        with torch.no_grad():
            for x in loader:
                model(x)
    """,
        "TD501",
    )


def test_td501_judges_recurrent_layers_by_their_dropout() -> None:
    """``nn.LSTM``, ``nn.GRU``, ``nn.RNN`` and ``nn.MultiheadAttention`` have no dropout
    unless given one, and recurrent cells none at all: ``eval()`` changes nothing in
    them. Given a dropout (by keyword, by position, or a value not known to be 0), the
    model behaves differently in the two modes."""
    assert_marked(
        """
    import torch
    from torch import nn
    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 16, 2, batch_first=True, bidirectional=True)
            self.gru = nn.GRU(16, 16, dropout=0.0)
            self.cell = nn.LSTMCell(8, 16)
            self.attention = nn.MultiheadAttention(16, 4)
            self.fc = nn.Linear(32, 2)
        def forward(self, x):
            return self.fc(self.lstm(x)[0][:, -1])
    class Keyword(Plain):
        def __init__(self, p):
            super().__init__()
            self.rnn = nn.RNN(8, 16, 2, dropout=p)
    class Positional(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 16, 2, True, True, 0.3)
    def evaluate(loader, model):
        with torch.no_grad():
            for x in loader:
                model(x)
    def evaluate_keyword(loader):
        model = Keyword(0.2)
        with torch.no_grad():
            for x in loader:
                model(x)  # expect: TD501
    def evaluate_positional(loader):
        model = Positional()
        with torch.no_grad():
            for x in loader:
                model(x)  # expect: TD501
    def main(loader):
        evaluate(loader, Plain())
    """,
        "TD501",
    )


def test_td501_quiet_for_a_teacher_inside_a_training_loop() -> None:
    assert_marked(
        """
    import torch
    def distill(student, teacher, loader, opt):
        for x, y in loader:
            with torch.no_grad():
                target = teacher(x)
            opt.zero_grad()
            loss = ((student(x) - target) ** 2).mean()
            loss.backward()
            opt.step()
    """,
        "TD501",
    )


# --- TD502 train-in-eval-mode -----------------------------------------------------------


def test_td502_flags_eval_never_undone_in_the_epoch_loop() -> None:
    assert_marked(
        """
    import torch
    def evaluate(model, loader):
        model.eval()
        with torch.no_grad():
            return sum(model(x).sum() for x in loader)
    def fit(model, train_loader, val_loader, opt, epochs):
        for epoch in range(epochs):
            for x, y in train_loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
            evaluate(model, val_loader)  # expect: TD502
    """,
        "TD502",
    )


_TRAINED_IN_EVAL = """
import torch
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3), {norm}, nn.ReLU())
    def forward(self, x):
        return self.body(x)
def fit(loader, epochs):
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for epoch in range(epochs):
        for x in loader:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
        model.eval()  {mark}
        with torch.no_grad():
            print(model(x))
"""


def test_td502_flags_training_in_eval_with_a_tracking_instance_norm() -> None:
    """eval() switches a tracking instance norm to its running averages: training in
    eval mode then normalises differently from what the model was built for."""
    norm = "nn.InstanceNorm2d(8, track_running_stats=True)"
    assert_marked(_TRAINED_IN_EVAL.format(norm=norm, mark="# expect: TD502"), "TD502")


def test_td502_quiet_when_the_only_norm_is_a_plain_instance_norm() -> None:
    """Without running statistics an instance norm is the same in both modes."""
    assert_marked(_TRAINED_IN_EVAL.format(norm="nn.InstanceNorm2d(8)", mark=""), "TD502")


def test_td502_flags_direct_eval_and_offers_an_unsafe_fix() -> None:
    src = """
    import torch
    def fit(model, loader, opt, epochs):
        model.train()
        for epoch in range(epochs):
            for x, y in loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
            model.eval()  # expect: TD502
            with torch.no_grad():
                print(model(x))
    """
    assert_marked(src, "TD502")
    (found,) = lint_findings(src, "TD502")
    assert found.fix is not None
    assert found.fix.edits[0].replacement.startswith("model.train()")


def test_td502_quiet_for_an_eval_scoped_to_one_training_forward() -> None:
    """ADVENT: the discriminator is put in eval mode for the generator's adversarial step
    and back in train mode for its own step, in every iteration."""
    assert_marked(
        """
    import torch
    from torch import nn
    def train(model, loader, opt, criterion):
        disc = nn.Sequential(nn.Conv2d(19, 64, 4), nn.BatchNorm2d(64), nn.Conv2d(64, 1, 4))
        opt_d = torch.optim.Adam(disc.parameters())
        model.train()
        for x_s, y_s, x_t in loader:
            opt.zero_grad()
            opt_d.zero_grad()
            disc.eval()
            criterion(model(x_s), y_s).backward()
            pred_t = model(x_t)
            loss_t = disc(pred_t).mean()
            loss_t.backward()
            disc.train()
            loss_d = disc(pred_t.detach()).mean()
            loss_d.backward()
            opt.step()
            opt_d.step()
    """,
        "TD502",
    )


def test_td502_still_flags_an_eval_undone_only_before_the_next_eval() -> None:
    """``train()`` after the forward, but another ``eval()`` before it: the training
    forward of the next pass still runs in eval mode."""
    assert_marked(
        """
    import torch
    def fit(model, loader, opt):
        for x, y in loader:
            model.eval()  # expect: TD502
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            with torch.no_grad():
                model(x)
    """,
        "TD502",
    )


def test_td502_maps_arguments_into_helpers() -> None:
    assert_marked(
        """
    def freeze(m):
        m.eval()
    def fit(net, loader, opt):
        for epoch in range(3):
            for x in loader:
                opt.zero_grad()
                net(x).sum().backward()
                opt.step()
            freeze(net)  # expect: TD502
    """,
        "TD502",
    )


def test_td502_quiet_when_train_is_called_each_epoch() -> None:
    assert_marked(
        """
    import torch
    def evaluate(model, loader):
        model.eval()
        with torch.no_grad():
            return [model(x) for x in loader]
    def fit(model, train_loader, val_loader, opt):
        for epoch in range(10):
            model.train()
            for x, y in train_loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
            evaluate(model, val_loader)
    """,
        "TD502",
    )


def test_td502_quiet_when_the_helper_restores_train_mode() -> None:
    assert_marked(
        """
    import torch
    def evaluate(model, loader):
        model.eval()
        with torch.no_grad():
            out = [model(x) for x in loader]
        model.train()
        return out
    def fit(model, loader, opt):
        for epoch in range(10):
            for x, y in loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
            evaluate(model, loader)
    """,
        "TD502",
    )


def test_td502_quiet_when_train_is_in_the_training_helper() -> None:
    assert_marked(
        """
    import torch
    class Runner:
        def train_one_epoch(self, loader):
            self.model.train()
            for x, y in loader:
                self.opt.zero_grad()
                self.model(x).sum().backward()
                self.opt.step()
        def validate(self, loader):
            self.model.eval()
            with torch.no_grad():
                for x, y in loader:
                    self.model(x)
        def fit(self, loader, epochs):
            for epoch in range(epochs):
                self.train_one_epoch(loader)
                self.validate(loader)
    """,
        "TD502",
    )


def test_td502_quiet_for_a_frozen_teacher_put_in_eval_each_step() -> None:
    assert_marked(
        """
    import torch
    def distill(student, teacher, loader, opt):
        for x, y in loader:
            teacher.eval()
            with torch.no_grad():
                target = teacher(x)
            opt.zero_grad()
            loss = ((student(x) - target) ** 2).mean()
            loss.backward()
            opt.step()
    """,
        "TD502",
    )


_LATENT_FIT = """
import torch
from torch import nn

def reconstruct(decoder, samples, steps):
    latent = torch.ones(1, 8).normal_(0, 0.01).cuda()
    latent.requires_grad = True
    optimizer = torch.optim.Adam({params}, lr=5e-3)
    for step in range(steps):
        decoder.eval(){mark}
        optimizer.zero_grad()
        inputs = torch.cat([latent.expand(len(samples), -1), samples], 1)
        loss = (decoder(inputs) - 1).abs().mean()
        loss.backward()
        optimizer.step()
    return latent

decoder = nn.Sequential(nn.Linear(11, 16), nn.Dropout(0.2), nn.Linear(16, 1))
"""


def test_td502_quiet_when_the_optimizer_trains_only_a_tensor_of_its_own() -> None:
    """DeepSDF's test-time reconstruction: the optimizer holds only the latent code, made
    by a torch factory; the decoder is frozen and belongs in eval mode. Given the
    decoder's parameters too, the same loop trains the decoder in eval mode."""
    assert_marked(_LATENT_FIT.format(params="[latent]", mark=""), "TD502")
    assert_marked(
        _LATENT_FIT.format(params="[latent, *decoder.parameters()]", mark="  # expect: TD502"),
        "TD502",
    )


_FEATURE_ATTACK = """
import numpy as np
import torch
from graphs import preprocess

def attack(model, graph, features, labels, steps):
    injected = features[-10:].cpu().data.numpy()
    injected = np.arcsin(injected)
    injected = preprocess(injected)
    perturbed = preprocess(features)
    perturbed.requires_grad_(True)
    optimizer = torch.optim.Adam({params}, lr=0.01)
    for step in range(steps):
        model.eval()
        pred = model(graph, torch.cat([perturbed, torch.sin(injected)]))
        loss = -torch.nn.functional.cross_entropy(pred, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_td502_quiet_when_the_optimizer_attacks_the_inputs() -> None:
    """CogDL's TDGIA injection attack: the optimizer holds node features copied out of
    numpy and a tensor the code makes trainable with ``requires_grad_(True)``, both made
    by a helper; the model stays in eval mode on purpose. A list that also holds the
    model's parameters trains the model in eval mode."""
    assert_marked(_FEATURE_ATTACK.format(params="[injected, perturbed]"), "TD502")
    flagged = _FEATURE_ATTACK.format(params="[injected, *model.parameters()]").replace(
        "        model.eval()\n", "        model.eval()  # expect: TD502\n"
    )
    assert_marked(flagged, "TD502")


def test_td501_reads_eval_through_an_alias_and_an_evaluating_method() -> None:
    """DeepRobust: ``model = self.model; model.eval()`` in the caller puts ``self.model``
    in eval mode before ``sample_final_edges()`` evaluates it; ``test_model.test()`` (the
    library's ``BaseModel.test`` calls ``self.eval()``) runs before a script's no_grad
    loop. A method that does not evaluate (``fit``) proves nothing."""
    source = """
import torch
from torch import nn
from lib import Trainable

class GCN(nn.Module, Trainable):
    def __init__(self, nfeat, nhid, dropout):
        super().__init__()
        self.layer = nn.Linear(nfeat, nhid)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.layer(x))

class Attack:
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))

    def attack(self, x):
        model = self.model
        model.eval()
        return self.sample(x)

    def sample(self, x):
        best = None
        for i in range(10):
            with torch.no_grad():
                out = self.model(x)
            best = out
        return best

test_model = GCN(nfeat=4, nhid=8, dropout=0.5)
test_model.fit(data)
test_model.test()
with torch.no_grad():
    for x in batches:
        print(test_model(x))
other = GCN(nfeat=4, nhid=8, dropout=0.5)
other.fit(data)
with torch.no_grad():
    for x in batches:
        print(other(x))  # expect: TD501
"""
    assert_marked(source, "TD501")
    plain = source.replace("test_model.test()", "test_model.summary()").replace(
        "print(test_model(x))", "print(test_model(x))  # expect: TD501"
    )
    assert_marked(plain, "TD501")


def test_td502_an_eval_followed_by_break_ends_the_training() -> None:
    """VoiceCraft's trainer: past the last step it calls ``validate_and_save()`` (which
    puts the model in eval mode) and breaks out; every other pass starts with
    ``model.train()``. An eval() with no break after it still leaks into the next pass."""
    source = """
import torch

class Trainer:
    def validate(self):
        self.model.eval()

    def train(self, loader, total):
        step = 0
        while True:
            for batch in loader:
                if step > total:
                    self.validate()
                    break
                out = self.model(batch)
                out.loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
                step += 1

    def train_leaky(self, loader):
        for epoch in range(3):
            for batch in loader:
                out = self.model(batch)
                out.loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
            if epoch % 2 == 0:
                self.validate()  # expect: TD502
"""
    assert_marked(source, "TD502")


def test_td502_follows_a_constant_argument_through_two_calls() -> None:
    """VQ-Diffusion's solver: the epoch loop calls ``validate_epoch()``, which calls
    ``step(batch, phase="val")``; the training branch of ``step`` never runs there, and
    ``train_epoch()`` puts the model back in training mode first. With the phase
    forgotten in the validation call, ``step`` trains in eval mode."""
    solver = """
import torch

class Solver:
    def step(self, batch, phase="train"):
        if phase == "train":
            output = self.model(batch)
        else:
            with torch.no_grad():
                output = self.model(batch)
        if phase == "train":
            self.optimizer.zero_grad()
            output.backward()
            self.optimizer.step()
        return output

    def train_epoch(self):
        self.model.train()
        for batch in self.loader:
            self.step(batch, phase="train")

    def validate_epoch(self):
        self.model.eval()
        for batch in self.val_loader:
            self.step(batch, phase="val")

    def fit(self):
        for epoch in range(10):
            self.train_epoch()
            self.validate_epoch()
"""
    assert_marked(solver, "TD502")
    forgotten = solver.replace(
        '            self.step(batch, phase="val")', "            self.step(batch)"
    )
    assert [code for code, _ in lint_codes(forgotten, "TD502")] == ["TD502"]


def test_td502_quiet_for_a_loop_that_takes_gradients_only_for_its_inputs() -> None:
    """GraphEBM's sampler: Langevin dynamics backpropagates the energy of generated
    inputs to move the inputs; no optimizer steps anywhere in the function, and the
    energy network is meant to be in eval mode. The training method of the same class,
    which steps an optimizer after the same eval(), is still flagged."""
    assert_marked(
        """
import torch
from torch import nn

class EBM:
    def __init__(self):
        self.energy = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.1), nn.Linear(16, 1))
        self.optimizer = torch.optim.Adam(self.energy.parameters())

    def sample(self, loader, steps):
        for batch in loader:
            x = batch.clone().requires_grad_(True)
            self.energy.eval()
            for _ in range(steps):
                energy = self.energy(x)
                energy.sum().backward()
                x.data.add_(x.grad.data, alpha=-0.1)
                x.grad.zero_()
            yield x.detach()

    def fit(self, loader):
        for batch in loader:
            self.energy.eval()  # expect: TD502
            self.optimizer.zero_grad()
            self.energy(batch).mean().backward()
            self.optimizer.step()
""",
        "TD502",
    )


def test_td501_quiet_for_deliberate_train_mode_batchnorm_recalibration() -> None:
    assert_marked(
        """
    import torch
    def update_bn(loader, model):
        was_training = model.training
        model.train()
        with torch.no_grad():
            for x in loader:
                model(x)
        model.train(was_training)
    def mc_dropout(model, x, samples=20):
        model.train()
        with torch.no_grad():
            return torch.stack([model(x) for _ in range(samples)])
    """,
        "TD501",
    )


def test_td501_quiet_when_eval_is_called_on_a_chained_receiver() -> None:
    assert_marked(
        """
    import torch
    def evaluate(model, loader, device):
        model.to(device).requires_grad_(False).eval()
        with torch.no_grad():
            for x, y in loader:
                model(x)
    """,
        "TD501",
    )


def test_td502_quiet_for_an_evaluation_written_without_no_grad() -> None:
    assert_marked(
        """
    def fit(model, loader, val_loader, opt):
        for epoch in range(5):
            model.train()
            for x, y in loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
            model.eval()
            scores = [model(x) for x, y in val_loader]
            for x, y in val_loader:
                scores.append(model(x))
    """,
        "TD502",
    )


def test_td502_quiet_for_the_phase_loop_of_the_transfer_learning_tutorial() -> None:
    assert_marked(
        """
    import torch
    def fit(model, loaders, criterion, optimizer, epochs):
        for epoch in range(epochs):
            for phase in ("train", "val"):
                if phase == "train":
                    model.train()
                else:
                    model.eval()
                for inputs, labels in loaders[phase]:
                    optimizer.zero_grad()
                    with torch.set_grad_enabled(phase == "train"):
                        loss = criterion(model(inputs), labels)
                        if phase == "train":
                            loss.backward()
                            optimizer.step()
    """,
        "TD502",
    )


def test_td502_flags_a_conditional_eval_that_is_never_undone() -> None:
    assert_marked(
        """
    import torch
    def fit(model, loader, val_loader, opt, epochs):
        model.train()
        for epoch in range(epochs):
            for x, y in loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
            if epoch % 5 == 0:
                model.eval()  # expect: TD502
                with torch.no_grad():
                    print(sum(model(x).sum() for x, y in val_loader))
    """,
        "TD502",
    )


# A phase loop whose mode line is replaced by each test's variant.
_PHASE_LOOP = """
import torch
def fit(model, loaders, criterion, optimizer, epochs):
    for epoch in range(epochs):
        for phase in ("train", "val"):
            MODE
            for inputs, labels in loaders[phase]:
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    loss = criterion(model(inputs), labels)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
"""


def _phase_loop(mode: str) -> str:
    indent = " " * 12
    return _PHASE_LOOP.replace("MODE", mode.replace("\n", "\n" + indent))


def test_td502_quiet_for_a_ternary_that_picks_the_mode() -> None:
    assert_marked(_phase_loop('model.train() if phase == "train" else model.eval()'), "TD502")
    assert_marked(_phase_loop('model.eval() if phase != "train" else model.train()'), "TD502")


def test_td502_quiet_for_separate_ifs_on_the_phase() -> None:
    assert_marked(
        _phase_loop(
            'if phase == "train":\n    model.train()\nif phase == "val":\n    model.eval()'
        ),
        "TD502",
    )
    assert_marked(
        _phase_loop(
            'if phase in ("val", "test"):\n    model.eval()\n'
            'if phase == "train":\n    model.train()'
        ),
        "TD502",
    )


def test_td502_quiet_for_opposite_tests_of_a_flag() -> None:
    assert_marked(
        """
    import torch
    def fit(model, loader, optimizer, epochs):
        for epoch in range(epochs):
            for training in (True, False):
                if not training:
                    model.eval()
                if training:
                    model.train()
                for x, y in loader:
                    with torch.set_grad_enabled(training):
                        loss = model(x).sum()
                        if training:
                            optimizer.zero_grad()
                            loss.backward()
                            optimizer.step()
    """,
        "TD502",
    )


def test_td502_flags_a_one_sided_ternary_eval() -> None:
    assert_marked(
        """
    import torch
    def fit(model, loader, val_loader, opt, epochs, validate):
        for epoch in range(epochs):
            for x, y in loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
            model.eval() if validate else None  # expect: TD502
            with torch.no_grad():
                print(sum(model(x).sum() for x, y in val_loader))
    """,
        "TD502",
    )


def test_td502_offers_no_fix_that_the_eval_would_undo() -> None:
    src = """
    def fit(model, loader, opt, epochs):
        for epoch in range(epochs):
            for x, y in loader:
                model.eval()  # expect: TD502
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
    """
    assert_marked(src, "TD502")
    (found,) = lint_findings(src, "TD502")
    assert found.fix is None


def test_td502_fix_converges(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent("""
    import torch
    def fit(model, loader, val_loader, opt, epochs):
        for epoch in range(epochs):
            for x, y in loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                print(sum(model(x).sum() for x, y in val_loader))
    """),
        encoding="utf-8",
    )
    selection = Selection.from_options(["TD502"], [])
    result = fix_file(FileJob(str(script)), selection, unsafe=True)
    assert result is not None and result.applied == 1
    assert result.fixed.count("model.train()") == 1
    assert lint_codes(result.fixed, "TD502") == []
    script.write_text(result.fixed, encoding="utf-8")
    again = fix_file(FileJob(str(script)), selection, unsafe=True)
    assert again is None or again.applied == 0


_FACTORY_SCRIPT = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), {layer})

    def forward(self, x):
        return self.body(x)

def make():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, opt

def evaluate(model, loader):
    with torch.no_grad():
        for x, y in loader:
            model(x){marker}

def main(loader):
    {targets} = make()
    model.train()
    for x, y in loader:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    evaluate(model, loader)
"""


def test_td501_follows_a_model_unpacked_from_a_factory_that_returns_a_tuple() -> None:
    src = _FACTORY_SCRIPT.format(
        layer="nn.Dropout(0.2)", marker="  # expect: TD501", targets="model, opt"
    )
    assert_marked(src, "TD501")


def test_td501_quiet_when_the_unpacked_factory_model_has_no_dropout_or_batchnorm() -> None:
    src = _FACTORY_SCRIPT.format(layer="nn.ReLU()", marker="", targets="model, opt")
    assert lint_codes(src, "TD501") == []


def test_td501_quiet_when_the_unpacking_cannot_be_matched_to_the_returned_tuple() -> None:
    src = _FACTORY_SCRIPT.format(layer="nn.Dropout(0.2)", marker="", targets="model, opt, extra")
    assert lint_codes(src, "TD501") == []
    starred = _FACTORY_SCRIPT.format(layer="nn.Dropout(0.2)", marker="", targets="model, *rest")
    assert lint_codes(starred, "TD501") == []


# --- TD502: a linear probe keeps its frozen backbone in eval mode on purpose ---------------

LINEAR_PROBE = """
import torch
import torch.nn as nn
def train(loader, model, criterion, optimizer):
    \"\"\"Frozen features: BatchNorm must not update the pre-trained running stats.\"\"\"
    model.eval()
    for images, target in loader:
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
def main(loader):
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Flatten(), nn.LazyLinear(10))
    {freeze}
    for epoch in range(10):
        train(loader, model, nn.CrossEntropyLoss(), optimizer)
"""


def test_td502_quiet_for_a_linear_probe_with_a_frozen_backbone() -> None:
    frozen = (
        "for name, p in model.named_parameters():\n"
        "        if not name.startswith('3.'):\n"
        "            p.requires_grad = False\n"
        "    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], 0.1)"
    )
    assert lint_codes(LINEAR_PROBE.replace("{freeze}", frozen), "TD502") == []
    head_only = (
        "model.requires_grad_(False)\n    optimizer = torch.optim.SGD(model[3].parameters(), 0.1)"
    )
    assert lint_codes(LINEAR_PROBE.replace("{freeze}", head_only), "TD502") == []


def test_td502_eval_before_the_forward_holds_from_the_first_iteration() -> None:
    source = LINEAR_PROBE.replace(
        "{freeze}", "optimizer = torch.optim.SGD(model.parameters(), 0.1)"
    )
    (found,) = lint_findings(source, "TD502")
    assert "from the first iteration" in found.message and "next iteration" not in found.message


# A distillation teacher kept in eval mode is used, not trained: no optimizer of the file
# takes its parameters, so its mode is what it needs (knowledge-distillation-pytorch).


def test_td502_quiet_on_a_teacher_no_optimizer_takes_in_a_plain_loop() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    teacher = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    student = nn.Sequential(nn.Linear(4, 2))
    optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
    def train(epoch):
        student.train()
        teacher.eval()
        for x, y in loader:
            optimizer.zero_grad()
            soft = teacher(x).detach()
            kd(student(x), y, soft).backward()
            optimizer.step()
    for epoch in range(10):
        train(epoch)
    """,
        "TD502",
    )


def test_td502_quiet_on_a_teacher_in_a_trainer_class() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    class Distiller:
        def __init__(self):
            self.student = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
            self.teacher = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
            self.head = nn.Linear(2, 2)
            self.opt = torch.optim.AdamW(
                [{"params": self.student.parameters()}, {"params": self.head.parameters()}]
            )
        def step(self, x, y):
            self.opt.zero_grad()
            loss = kd(self.head(self.student(x)), self.teacher(x), y)
            loss.backward()
            self.opt.step()
        def fit(self, loader, epochs):
            for epoch in range(epochs):
                self.student.train()
                self.teacher.eval()
                for x, y in loader:
                    self.step(x, y)
    """,
        "TD502",
    )


def test_td502_still_flags_the_student_beside_a_teacher() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    teacher = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    student = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, student.parameters()), lr=0.1)
    def evaluate():
        student.eval()
        with torch.no_grad():
            return [student(x) for x, _ in valid]
    for epoch in range(10):
        teacher.eval()
        for x, y in loader:
            optimizer.zero_grad()
            kd(student(x), y, teacher(x).detach()).backward()
            optimizer.step()
        evaluate()  # expect: TD502
    """,
        "TD502",
    )


def test_td502_still_flags_when_an_optimizer_takes_parameters_it_cannot_read() -> None:
    # `params` comes from elsewhere: the teacher may be in it, so the rule speaks.
    assert_marked(
        """
    import torch
    from torch import nn
    teacher = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(make_params(), lr=0.1)
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(teacher(x), y).backward()
            optimizer.step()
        teacher.eval()  # expect: TD502
    """,
        "TD502",
    )


SHARED_EPOCH = """
import torch
from torch import nn
model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
def run_epoch(loader, validate=False):
    for x, y in loader:
        loss = (model(x) - y).pow(2).mean()
        if not validate:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
for epoch in range(10):
    model.train()
    run_epoch(train_loader)
    model.eval(){mark}
    run_epoch(val_loader{second})
"""


@pytest.mark.parametrize(
    "second, flagged",
    [
        (", validate=True", False),  # the flag rules the backward out
        (", True", False),  # by position too
        ("", True),  # the default: this pass trains in eval mode
        (", validate=False", True),
        (", validate=flag", True),  # not a constant: the rule cannot rule it out
    ],
)
def test_td502_follows_a_constant_flag_into_a_shared_epoch_helper(
    second: str, flagged: bool
) -> None:
    mark = "  # expect: TD502" if flagged else ""
    assert_marked(SHARED_EPOCH.format(second=second, mark=mark), "TD502")


def test_td502_a_flag_the_helper_rebinds_decides_nothing() -> None:
    source = SHARED_EPOCH.replace(
        "    for x, y in loader:", "    validate = validate and not loader\n    for x, y in loader:"
    )
    assert_marked(source.format(second=", validate=True", mark="  # expect: TD502"), "TD502")


TRAINER_WITH_A_WRAPPER = """
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

class Trainer:
    def __init__(self, rank):
        self.model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
        self.model_ddp = DDP(self.model, device_ids=[rank])

    def validate(self, loader):
        {mode}
        with torch.no_grad():
            for x in loader:
                print(self.model(x))  {mark}
        self.model_ddp.train()
"""


@pytest.mark.parametrize(
    "mode, flagged",
    [
        # RobustVideoMatting: eval() on the DDP wrapper sets the wrapped model's mode
        ("self.model_ddp.eval()", False),
        ("self.model.eval()", False),
        # a wrapper of another model, or nothing, leaves this one training
        ("self.other_ddp.eval()", True),
        ("pass", True),
    ],
)
def test_td501_eval_on_a_wrapper_of_the_model_counts(mode: str, flagged: bool) -> None:
    source = TRAINER_WITH_A_WRAPPER.replace("{mode}", mode).replace(
        "{mark}", "# expect: TD501" if flagged else ""
    )
    assert_marked(source, "TD501")


SCRIPT_WITH_A_PARALLEL_ALIAS = """
import torch
from torch import nn

model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
if torch.cuda.device_count() > 1:
    para_model = {wrapped}
else:
    para_model = model.to("cpu")

def evaluate(loader):
    {mode}
    with torch.no_grad():
        for x in loader:
            print(para_model(x))  {mark}
    model.train()
"""


@pytest.mark.parametrize(
    "wrapped, mode, flagged",
    [
        # deq: every binding of the global `para_model` wraps or is `model`
        ("nn.DataParallel(model, dim=1).to('cuda')", "model.eval()", False),
        ("BalancedDataParallel(8, model, dim=1).to('cuda')", "model.eval()", False),
        ("nn.DataParallel(model)", "para_model.eval()", False),
        # a binding holding another model: `model.eval()` does not reach it
        ("nn.DataParallel(teacher)", "model.eval()", True),
        ("nn.DataParallel(model)", "pass", True),
    ],
)
def test_td501_eval_on_the_model_a_global_wrapper_holds(
    wrapped: str, mode: str, flagged: bool
) -> None:
    source = SCRIPT_WITH_A_PARALLEL_ALIAS.format(
        wrapped=wrapped, mode=mode, mark="# expect: TD501" if flagged else ""
    )
    assert_marked(source, "TD501")


TRAINER_WITH_ATTRIBUTE_ALIASES = """
import torch
from torch import nn

class Trainer:
    def __init__(self, compiled):
        self.model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self._prepare(compiled)

    def _prepare(self, compiled):
        if compiled:
            self.model = torch.compile(self.model)
            self.model_train = self.model
            {binding}
        else:
            self.model_train = self.model
            self.model_eval = self.model

    def _set_eval(self):
        {mode}

    def validate(self, loader):
        self._set_eval()
        with torch.no_grad():
            for x in loader:
                print({evaluated}(x))  {mark}
"""


@pytest.mark.parametrize(
    "binding, mode, evaluated, flagged",
    [
        # makani's trainers: every binding of `self.model_eval` is `self.model`, so the
        # eval() of `self.model` (in `_set_eval()`) is the eval() of `self.model_eval`
        ("self.model_eval = self.model", "self.model.eval()", "self.model_eval", False),
        # the other way round, and through a second alias of the same model
        ("self.model_eval = self.model", "self.model_eval.eval()", "self.model", False),
        ("self.model_eval = self.model", "self.model_train.eval()", "self.model_eval", False),
        ("self.model_eval = self.model_train", "self.model.eval()", "self.model_eval", False),
        # another module in one binding (a copy, an EMA) is not switched by `self.model`
        (
            "self.model_eval = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))",
            "self.model.eval()",
            "self.model_eval",
            True,
        ),
        ("self.model_eval = self.model", "pass", "self.model_eval", True),
    ],
)
def test_td501_eval_through_an_attribute_alias_of_the_model(
    binding: str, mode: str, evaluated: str, flagged: bool
) -> None:
    source = (
        TRAINER_WITH_ATTRIBUTE_ALIASES.replace("{binding}", binding)
        .replace("{mode}", mode)
        .replace("{evaluated}", evaluated)
        .replace("{mark}", "# expect: TD501" if flagged else "")
    )
    assert_marked(source, "TD501")


HOLDER_OF_THE_NET = """
import torch
from torch import nn

class _Step(nn.Module):
    def __init__(self, args, net, optimizer):
        super().__init__()
        self.args = args
        self.optimizer = optimizer
        {keeps}

    def forward(self, x, y):
        self.optimizer.zero_grad()
        nn.functional.cross_entropy(self.net(x), y).backward()
        self.optimizer.step()

class Method:
    def __init__(self, args, device):
        self.net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)
        self.model = _Step(args, self.net, self.optimizer).to(device)

    def prediction(self, loader):
        self.model.eval()
        with torch.no_grad():
            for x in loader:
                print(self.net(x))  {mark}
"""


@pytest.mark.parametrize(
    "keeps, flagged",
    [
        # open-iad's DNE: the module built from the net keeps it as a child, so its
        # eval() puts the net in eval mode too
        ("self.net = net", False),
        # a module that only reads the net while it is built holds no child
        ("self.net = nn.Linear(4, 4)\n        self.width = len(net)", True),
    ],
)
def test_td501_eval_on_a_module_that_keeps_the_model_as_a_child(keeps: str, flagged: bool) -> None:
    source = HOLDER_OF_THE_NET.replace("{keeps}", keeps).replace(
        "{mark}", "# expect: TD501" if flagged else ""
    )
    assert_marked(source, "TD501")


@pytest.mark.parametrize(
    "setup, flagged",
    [
        # RobustVideoMatting's speed test: built in eval mode by a method __init__ calls,
        # then scripted and frozen from itself
        (
            "self.model = Net().to(self.device).eval()\n"
            "        self.model = torch.jit.script(self.model)",
            False,
        ),
        # a new model built after the eval() one is in training mode again
        ("self.model = Net().eval()\n        self.model = Net()", True),
        ("self.model = Net()", True),
    ],
)
def test_td501_a_model_built_in_eval_mode_by_a_setup_method(setup: str, flagged: bool) -> None:
    source = f"""
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        return self.drop(x)

class SpeedTest:
    def __init__(self):
        self.device = "cpu"
        self.init_model()

    def init_model(self):
        {setup}

    def loop(self, frames):
        with torch.no_grad():
            for x in frames:
                self.model(x)  {"# expect: TD501" if flagged else ""}
"""
    assert_marked(source, "TD501")


@pytest.mark.parametrize(
    "load, flagged",
    [
        # tabicl's scikit-learn wrapper: fit() calls _load_model(), which builds the
        # network, loads its weights and puts it in eval mode; nothing trains it again
        (
            "self.model_ = Net()\n"
            "        self.model_.load_state_dict(state)\n"
            "        self.model_.eval()",
            False,
        ),
        # eval() before the last binding: the model predicted with is a new one
        ("self.model_ = Net()\n        self.model_.eval()\n        self.model_ = Net()", True),
        # eval() only on one path of the method
        ("self.model_ = Net()\n        if state:\n            self.model_.eval()", True),
        # put back in training by another method of the class
        ("self.model_ = Net()\n        self.model_.eval()\n        self.model_.train()", True),
    ],
)
def test_td501_a_model_put_in_eval_mode_where_a_method_builds_it(load: str, flagged: bool) -> None:
    source = f"""
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        return self.drop(x)

class Classifier:
    def __init__(self, batch_size=8):
        self.batch_size = batch_size

    def _load_model(self, state):
        {load}

    def fit(self, state):
        self._load_model(state)
        return self

    def predict(self, batches):
        outputs = []
        for x in batches:
            with torch.no_grad():
                outputs.append(self.model_(x))  {"# expect: TD501" if flagged else ""}
        return outputs
"""
    assert_marked(source, "TD501")


ADVERSARIAL_EPOCHS = """
import torch
from torch import nn

def attack_pgd(model, x, y, steps):
    delta = torch.zeros_like(x, requires_grad=True)
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(x + delta), y)
        loss.backward()
        delta.data = (delta + 0.01 * delta.grad.sign()).clamp(-0.03, 0.03)
        delta.grad.zero_()
    return delta.detach()

def run(model, train_batches, test_batches, opt, epochs):
    for epoch in range(epochs):
        {top}
        for x, y in train_batches:
            delta = attack_pgd(model, x, y, 3)
            loss = nn.functional.cross_entropy(model(x + delta), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval(){mark}
        for x, y in test_batches:
            delta = attack_pgd(model, x, y, 10)
            with torch.no_grad():
                print(model(x + delta).argmax(1).eq(y).float().mean())
"""


@pytest.mark.parametrize(
    ("top", "flagged"),
    [
        # Bag of Tricks for AT: train() at the top of each epoch; after eval() only the
        # test attack runs backward, for the input's gradient, with no step
        ("model.train()", False),
        # without train() the next epoch trains in eval mode
        ("pass", True),
    ],
)
def test_td502_an_attack_at_evaluation_is_no_training(top: str, flagged: bool) -> None:
    source = ADVERSARIAL_EPOCHS.replace("{top}", top).replace(
        "{mark}", "  # expect: TD502" if flagged else ""
    )
    model = "model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.2), nn.Linear(8, 3))\n"
    assert_marked(source.replace("def run(", model + "\ndef run("), "TD502")


HEAD_WARM_UP = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU())
        self.heads = nn.ModuleList([nn.Linear(8, 3)])

    def forward(self, x):
        return self.heads[-1](self.body(x))


class Learner:
    def __init__(self, model):
        self.model = model

    def warm_up(self, batches, epochs):
        self.optimizer = torch.optim.SGD(self.model.heads[-1].parameters(), lr=0.1)
        for epoch in range(epochs):
            {top}
            for x, y in batches:
                loss = nn.functional.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            self.model.eval(){mark}
            with torch.no_grad():
                for x, y in batches:
                    print(self.model(x).argmax(1).eq(y).float().mean())
"""


@pytest.mark.parametrize(
    ("top", "flagged"),
    [
        # FACIL's head warm-up: the new head is put in train mode every epoch, the frozen
        # rest of the model stays in eval mode on purpose
        ("self.model.heads[-1].train()", False),
        ("self.model.body[1].train()", False),
        # nothing puts any part back in train mode: the next epoch trains in eval mode
        ("pass", True),
    ],
)
def test_td502_quiet_where_the_loop_sets_the_mode_of_a_part(top: str, flagged: bool) -> None:
    source = HEAD_WARM_UP.replace("{top}", top).replace(
        "{mark}", "  # expect: TD502" if flagged else ""
    )
    assert_marked(source, "TD502")


LINEAR_STAGE = """
import torch
from torch import nn


def linear_stage(net, heads, loader, optimizer):
    net.train()
    for images, labels in loader:
        net.eval(){mark}
        _, features = net(images, return_feature=True)
        {use}
        loss = nn.functional.cross_entropy(heads(penultimate), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_td502_a_forward_whose_output_is_only_detached_trains_nothing() -> None:
    """OpenOOD's CSI linear stage: the backbone runs in eval mode on purpose every step and
    its features are detached; only the linear heads learn. Without the detach the
    backbone trains in eval mode."""
    detached = LINEAR_STAGE.format(mark="", use="penultimate = features.detach()")
    assert_marked(detached, "TD502")
    trained = LINEAR_STAGE.format(mark="  # expect: TD502", use="penultimate = features")
    assert_marked(trained, "TD502")


_PICKING_NET = """
import torch
from torch import nn


class PoseNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.pose = nn.Conv2d(8, 6, 1)

    def forward(self, x):
        features = torch.relu(self.conv(x))
        masks = [features, features.mean(1)]
        pose = self.pose(features).mean((2, 3))
{returns}
"""

_PICKING_EVAL = """

def evaluate(net, frames):
    with torch.no_grad():
        for frame in frames:
            _, pose = net(frame)
            print(pose)


evaluate(PoseNet(), [torch.randn(1, 3, 8, 8)])
"""


@pytest.mark.parametrize(
    ("returns", "flagged"),
    [
        # SfmLearner: the mode picks which outputs come back, not their values
        (
            "        if self.training:\n            return masks, pose\n"
            "        else:\n            return masks[0], pose",
            False,
        ),
        (
            "        if not self.training:\n            return masks[0], pose\n"
            "        return masks, pose",
            False,
        ),
        # the mode changes a value: evaluating in training mode is wrong
        (
            "        if self.training:\n            pose = pose * 0.5\n        return masks, pose",
            True,
        ),
        (
            "        if self.training:\n            return masks, pose\n"
            "        return masks[0], pose.tanh()",
            True,
        ),
    ],
)
def test_td501_a_mode_test_that_only_picks_outputs_is_not_mode_dependence(
    returns: str, flagged: bool, tmp_path: Path
) -> None:
    # the class in the linted file, and in another module of the project
    source = _PICKING_NET.format(returns=returns)
    assert bool(lint_codes(source + _PICKING_EVAL, "TD501")) is flagged
    (tmp_path / "nets.py").write_text(source)
    (tmp_path / "test_pose.py").write_text(
        "import torch\nfrom nets import PoseNet\n" + _PICKING_EVAL
    )
    report = lint(tmp_path, config=LintConfig(select=("TD501",)), jobs=1)
    assert bool(report.findings) is flagged, report.findings


_WRAPPER_EVALUATION = """
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))

    def forward(self, x):
        return self.body(x)


class Ranker(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Encoder()

    def forward(self, x):
        return self.model(x)


def evaluate(ranker, batches):
    {mode}
    with torch.no_grad():
        for x in batches:
            print(ranker(x))


evaluate(Ranker(), [torch.randn(2, 4)])
"""


@pytest.mark.parametrize(
    ("mode", "flagged"),
    [
        ("ranker.model.eval()", False),  # BLINK: the wrapper's model is put in eval mode
        ("ranker.eval()", False),
        ("ranker.model.train()", True),
        ("pass", True),
    ],
)
def test_td501_eval_of_the_part_evaluated_through_sets_the_mode(mode: str, flagged: bool) -> None:
    assert bool(lint_codes(_WRAPPER_EVALUATION.format(mode=mode), "TD501")) is flagged


_LIBRARY_RUN = """
import torch
from torch import nn
from skorch import NeuralNetClassifier
from lightning import Trainer


class Embedder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.3))

    def forward(self, x):
        return self.body(x)


class Pair(nn.Module):
    def __init__(self, emb):
        super().__init__()
        self.emb = emb

    def forward(self, x):
        return self.emb(x)


emb = Embedder()
model = Pair(emb)
{run}
with torch.no_grad():
    feats = [emb(x) for x in [torch.randn(2, 4)]]
for x in [torch.randn(2, 4)]:
    with torch.no_grad():
        print(emb(x))
"""


@pytest.mark.parametrize(
    ("run", "flagged"),
    [
        # braindecode: the module holding the model goes to a skorch net, which trains
        # and validates it (and leaves it in eval mode); the file cannot see which mode
        ("clf = NeuralNetClassifier(model, max_epochs=3)\nclf.fit(X, y)", False),
        ("Trainer(max_epochs=1).fit(model)", False),
        ("clf = NeuralNetClassifier(Pair(emb))\nclf.fit(X, y)", False),  # built in the call
        ("clf = NeuralNetClassifier(emb)\nclf.predict(X)", False),
        # built, never run: the mode is still the one the file sees
        ("clf = NeuralNetClassifier(model)", True),
        ("clf = NeuralNetClassifier(model)\nclf.set_params(lr=0.1)", True),
        ("clf = NeuralNetClassifier(Embedder())\nclf.fit(X, y)", True),  # another model
        ("pass", True),
    ],
)
def test_td501_a_model_a_library_runs_is_in_the_mode_it_left(run: str, flagged: bool) -> None:
    assert bool(lint_codes(_LIBRARY_RUN.format(run=run), "TD501")) is flagged


_LOADED_BY_A_HELPER = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.3))

    def forward(self, x):
        return self.body(x)


def load_net(path):
    net = Net()
    net.load_state_dict(torch.load(path, map_location="cpu"))
    {helper_mode}
    return net


class Predictor:
    def __init__(self, path, compile=True):
        self.net = {build}
        if compile:
            self.net = torch.compile(self.net)

    def _load(self, path):
        net = Net()
        net.load_state_dict(torch.load(path, map_location="cpu"))
        {helper_mode}
        return net

    @torch.no_grad()
    def predict(self, batches):
        return [self.net(x) for x in batches]

    @torch.no_grad()
    def predict_loop(self, batches):
        out = []
        for x in batches:
            out.append(self.net(x))
        return out
"""


@pytest.mark.parametrize(
    ("build", "helper_mode", "flagged"),
    [
        # face-alignment: `self.net = self._load_native(...)`, which calls net.eval()
        ("self._load(path)", "net.eval()", False),
        ("load_net(path)", "net.eval()", False),
        ("self._load(path)", "net.train(False)", False),
        ("self._load(path)", "pass", True),  # the helper leaves it in training mode
        ("Net()", "net.eval()", True),  # built here, never evaluated
    ],
)
def test_td501_a_model_a_helper_returns_in_eval_mode(
    build: str, helper_mode: str, flagged: bool
) -> None:
    source = _LOADED_BY_A_HELPER.format(build=build, helper_mode=helper_mode)
    assert bool(lint_codes(source, "TD501")) is flagged


_CLOSURE = """
import torch
from torch import nn
from concurrent.futures import ThreadPoolExecutor


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.3))

    def forward(self, x):
        return self.body(x)


def build():
    return Net()


def predict_all(batches, path):
    model = Net()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    {mode}

    def run(chunk):
        {local}
        outputs = []
        for x in chunk:
            with torch.no_grad():
                outputs.append(model(x))
        return outputs

    with ThreadPoolExecutor() as pool:
        return list(pool.map(run, batches))
"""


@pytest.mark.parametrize(
    ("mode", "local", "flagged"),
    [
        # GIT's inference: the closure reads the enclosing function's model, put in eval
        # mode before the def; it is only handed to a pool, never called by name
        ("model.eval()", "pass", False),
        ("model.train(False)", "pass", False),
        ("pass", "pass", True),
        ("model.eval()", "model = build()", True),  # a model of its own
    ],
)
def test_td501_a_closure_evaluates_the_enclosing_functions_model(
    mode: str, local: str, flagged: bool
) -> None:
    source = _CLOSURE.format(mode=mode, local=local)
    assert bool(lint_codes(source, "TD501")) is flagged


_ONE_RECURRENT_LAYER = """
import torch
from torch import nn


class Predictor(nn.Module):
    def __init__(self, features=16, num_layers=1, dropout=0.5):
        super().__init__()
        self.rnn = {layer}
        self.linear = nn.Linear(features, 8)

    def forward(self, x):
        return self.linear(self.rnn(x)[0])


def evaluate(batches):
    model = Predictor()
    optimizer = torch.optim.Adam(model.parameters())
    for x in batches:
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
    with torch.no_grad():
        for x in batches:
            print(model(x))
"""


@pytest.mark.parametrize(
    ("layer", "flagged"),
    [
        # monkey-net: dropout acts between stacked layers; one layer has none to switch
        ("nn.GRU(8, features, dropout=dropout, batch_first=True)", False),
        ("nn.GRU(8, features, num_layers=num_layers, dropout=dropout)", False),
        ("nn.LSTM(8, features, 1, dropout=0.3)", False),
        ("nn.RNN(8, features, num_layers=1, dropout=0.3)", False),
        # stacked layers with a dropout between them: mode-dependent
        ("nn.GRU(8, features, num_layers=2, dropout=dropout)", True),
        ("nn.LSTM(8, features, 3, True, True, 0.3)", True),
    ],
)
def test_td501_a_single_recurrent_layer_has_no_dropout(layer: str, flagged: bool) -> None:
    assert bool(lint_codes(_ONE_RECURRENT_LAYER.format(layer=layer), "TD501")) is flagged


_SPECTRAL_MODEL = """
import torch
from torch import nn


class Spectral(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lift = nn.Linear(2, width)
        self.mix = nn.Conv1d(width, width, 1)
        self.out = nn.Linear(width, 1){extra}

    def forward(self, x):
        return self.out(torch.relu(self.mix(self.lift(x).transpose(1, 2)).transpose(1, 2)))
"""

_FIT_WITH_VALIDATION = """
import torch
from models import Spectral


def validate(model, loader):
    model.eval()
    with torch.no_grad():
        return sum(float(model(x).mean()) for x in loader)


def main(loader, epochs):
    model = Spectral(16)
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(epochs):
        for x in loader:
            optimizer.zero_grad()
            model(x).pow(2).mean().backward()
            optimizer.step()
        validate(model, loader)
"""


@pytest.mark.parametrize(
    ("extra", "flagged"),
    [
        # physicsnemo's FNO: convolutions, linear layers, activations; eval() changes nothing
        ("", False),
        ("\n        self.drop = nn.Dropout(0.1)", True),
        ("\n        self.norm = nn.BatchNorm1d(width)", True),
        # something from outside the project: it cannot be told, so it counts
        ("\n        self.head = timm.create_model('resnet18')", True),
    ],
)
def test_td502_a_project_model_with_no_mode_dependent_layer(
    tmp_path: Path, extra: str, flagged: bool
) -> None:
    (tmp_path / "models.py").write_text(
        "import timm\n" + _SPECTRAL_MODEL.format(extra=extra), encoding="utf-8"
    )
    (tmp_path / "train.py").write_text(_FIT_WITH_VALIDATION, encoding="utf-8")
    report = lint(tmp_path, config=LintConfig(), select=["TD502"], jobs=1)
    assert bool(report.findings) is flagged, report.findings


@pytest.mark.parametrize(
    ("freeze", "flagged"),
    [
        # MOON: last round's models kept frozen as negatives, under the same loop name
        ("for param in net.parameters():\n                param.requires_grad = False", False),
        ("net.requires_grad_(False)", False),
        ("pass", True),
        ("for param in net.head.parameters():\n                param.requires_grad = False", True),
    ],
)
def test_td502_an_eval_that_freezes_the_model_is_no_training_in_eval(
    freeze: str, flagged: bool
) -> None:
    source = f"""
import copy
import torch
from torch import nn


def rounds(nets, loader, rounds):
    previous = None
    for round_ in range(rounds):
        for net_id, net in nets.items():
            optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
            for x, y in loader:
                optimizer.zero_grad()
                nn.functional.cross_entropy(net(x), y).backward()
                optimizer.step()
        old_nets = copy.deepcopy(nets)
        for _, net in old_nets.items():
            net.eval()
            {freeze}
        previous = old_nets
    return previous
"""
    assert bool(lint_findings(source, "TD502")) is flagged


def test_td502_an_optimizer_from_a_third_party_package_trains_the_model() -> None:
    """reformer-pytorch's pretraining steps fairseq's Adafactor and evaluates with
    `self.model.eval()` every few steps, `train()` called once before the loop: the steps
    of a third-party optimizer are optimizer steps like torch's own."""
    assert_marked(
        """
        import torch.nn as nn
        from fairseq.optim.adafactor import Adafactor

        class Trainer:
            def __init__(self):
                self.model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))

            def train(self, loader, eval_loader):
                optimizer = Adafactor(self.model.parameters())
                self.model.train()
                for step, (x, y) in enumerate(loader):
                    loss = (self.model(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    self.model.zero_grad()
                    if step % 100 == 0:
                        self.evaluate(eval_loader)  # expect: TD502

            def evaluate(self, loader):
                self.model.eval()
                for x, y in loader:
                    self.model(x)
        """,
        "TD502",
    )
