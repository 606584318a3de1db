"""TD202 backward-under-no-grad, TD206 forward-called-directly, TD207 parameter-data-mutated."""

from __future__ import annotations

import textwrap

import pytest

from tests.unit.static.helpers import assert_marked, lint_findings
from torchdoctor.findings import Applicability, Confidence, Severity
from torchdoctor.static.fixes import apply_fixes

# --- TD202 backward-under-no-grad -------------------------------------------------------


def test_td202_flags_backward_in_a_no_grad_block() -> None:
    assert_marked(
        """
    import torch
    def step(model, x, y, opt):
        with torch.no_grad():
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()  # expect: TD202
            opt.step()
    """,
        "TD202",
    )


def test_td202_quiet_for_a_custom_kernels_backward_op() -> None:
    """RWKV's autograd.Function: ``torch.ops.wkv6.backward(...)`` is the CUDA kernel's
    backward op, called under ``no_grad`` inside ``backward`` on purpose."""
    assert_marked(
        """
    import torch
    class WKV(torch.autograd.Function):
        @staticmethod
        def backward(ctx, gy):
            with torch.no_grad():
                r, k = ctx.saved_tensors
                gr, gk = torch.empty_like(r), torch.empty_like(k)
                torch.ops.wkv6.backward(r, k, gy, gr, gk)
                return gr, gk
    """,
        "TD202",
    )


def test_td202_flags_a_decorated_train_step_with_aliases() -> None:
    assert_marked(
        """
    import torch as T
    from torch import inference_mode
    @inference_mode()
    def train_step(model, batch, opt):
        out = model(batch)
        loss = out.sum()
        loss.backward()  # expect: TD202
    @T.no_grad
    def other(model, batch):
        model(batch).mean().backward()  # expect: TD202
    """,
        "TD202",
    )


def test_td202_flags_set_grad_enabled_false() -> None:
    assert_marked(
        """
    import torch
    def train(model, loader):
        for x in loader:
            with torch.set_grad_enabled(False):
                loss = model(x).sum()
                loss.backward()  # expect: TD202
    """,
        "TD202",
    )


def test_td202_message_names_the_block() -> None:
    (found,) = lint_findings(
        """
    import torch
    with torch.inference_mode():
        loss = model(x).sum()
        loss.backward()
    """,
        "TD202",
    )
    assert "`torch.inference_mode()` (line 3)" in found.message
    assert "element 0 of tensors does not require grad" in found.message


def test_td202_quiet_when_enable_grad_is_nested() -> None:
    assert_marked(
        """
    import torch
    @torch.no_grad()
    def refine(model, x):
        with torch.enable_grad():
            loss = model(x).sum()
            loss.backward()
    """,
        "TD202",
    )


def test_td202_quiet_when_the_loss_was_built_outside() -> None:
    assert_marked(
        """
    import torch
    def step(model, x):
        loss = model(x).sum()
        with torch.no_grad():
            loss.backward()
    @torch.no_grad()
    def apply(loss):
        loss.backward()
    """,
        "TD202",
    )


def test_td202_quiet_for_run_time_flag_and_for_inference_mode_false() -> None:
    assert_marked(
        """
    import torch
    def run(model, x, training):
        with torch.set_grad_enabled(training):
            loss = model(x).sum()
            if training:
                loss.backward()
        with torch.inference_mode(False):
            model(x).sum().backward()
    """,
        "TD202",
    )


def test_td202_quiet_for_a_function_defined_inside_no_grad() -> None:
    assert_marked(
        """
    import torch
    with torch.no_grad():
        def closure(model, x):
            loss = model(x).sum()
            loss.backward()
            return loss
    """,
        "TD202",
    )


def test_td202_quiet_for_a_loss_computed_under_enable_grad_in_a_no_grad_step() -> None:
    """PINNacle's loss-weighting optimizers: ``step`` is ``@torch.no_grad()``, the losses
    are computed inside ``with torch.enable_grad():`` and backpropagated after the block.
    They have a graph, and ``backward()`` under ``no_grad`` runs on it."""
    assert_marked(
        """
    import torch
    class LRAdaptor(torch.optim.Optimizer):
        @torch.no_grad()
        def step(self, closure):
            with torch.enable_grad():
                _ = closure(skip_backward=True)
                losses = self.losses / torch.as_tensor(self.loss_weight)
                pde_loss = torch.sum(losses[:self.num_pde])
            self.zero_grad()
            pde_loss.backward(retain_graph=True)
    class NTK(torch.optim.Optimizer):
        @torch.no_grad()
        def step(self, inputs):
            with torch.enable_grad():
                inputs.requires_grad_()
                outputs = self.pde.net(inputs)
                losses = self.pde.losses(inputs, outputs)
                loss_r = torch.sum(losses[:self.num_pde])
                loss_b = torch.sum(losses[self.num_pde:])
            for p in self.params:
                loss_r.backward(retain_graph=True)
                loss_b.backward(retain_graph=True)
    """,
        "TD202",
    )


def test_td202_quiet_for_set_grad_enabled_true_inside_a_no_grad_block() -> None:
    assert_marked(
        """
    import torch
    from torch import set_grad_enabled
    def refine(model, x):
        with torch.no_grad():
            with torch.set_grad_enabled(True):
                if x is not None:
                    loss = model(x).sum()
            loss.backward()
        with torch.inference_mode(), set_grad_enabled(True):
            other = model(x).sum()
        other.backward()
    """,
        "TD202",
    )


def test_td202_still_flags_a_loss_computed_under_no_grad_beside_an_enable_grad_block() -> None:
    """Only the values computed inside the ``enable_grad`` block have a graph: a loss
    computed after it, or rebound under ``no_grad`` from one computed inside, has none."""
    assert_marked(
        """
    import torch
    @torch.no_grad()
    def step(model, x, y):
        with torch.enable_grad():
            warm = model(x).sum()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()  # expect: TD202
        warm = warm * 2
        warm.backward()  # expect: TD202
    def other(model, x):
        with torch.no_grad():
            with torch.enable_grad():
                pass
            loss = model(x).sum()
            loss.backward()  # expect: TD202
    """,
        "TD202",
    )


# --- TD206 forward-called-directly ------------------------------------------------------


def test_td206_flags_forward_on_a_module_variable() -> None:
    assert_marked(
        """
    import torch.nn as nn
    class Net(nn.Module):
        def forward(self, x):
            return x
    net = Net()
    y = net.forward(1)  # expect: TD206
    layer = nn.Linear(2, 2).to("cpu")
    z = layer.forward(y)  # expect: TD206
    """,
        "TD206",
    )


def test_td206_flags_self_attribute_module_and_gives_an_unsafe_fix() -> None:
    src = textwrap.dedent("""\
        from torch import nn
        class Wrapper(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.LSTM(4, 4)
            def forward(self, x):
                return self.encoder.forward(x)
        """)
    (found,) = lint_findings(src, "TD206")
    assert found.location.line == 7
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    fixed, _ = apply_fixes(src, [found.fix])
    assert "return self.encoder(x)" in fixed


def test_td206_name_hint_has_medium_confidence_and_no_fix() -> None:
    (found,) = lint_findings(
        """
    def predict(model, x):
        model.eval()
        return model.forward(x)
    """,
        "TD206",
    )
    assert found.confidence is Confidence.MEDIUM and found.fix is None


def test_td206_quiet_when_only_a_name_says_module() -> None:
    """An OpenCV network set through ``self.__dict__.update(locals())``, a camera model
    passed in: nothing shows they are modules, and ``x(...)`` would break them."""
    assert_marked(
        """
    import cv2
    class Backend:
        def __init__(self, weights, dnn=True):
            net = cv2.dnn.readNetFromONNX(weights)
            self.__dict__.update(locals())
        def run(self, im):
            self.net.setInput(im)
            return self.net.forward()
    def degrade(img, isp_model=None):
        if isp_model is not None:
            img = isp_model.forward(img.copy())
        return img
    """,
        "TD206",
    )


def test_td206_a_name_hinted_model_trained_on_is_flagged_with_its_fix() -> None:
    (found,) = lint_findings(
        """
    def train(model, x, optimizer):
        model.forward(x).sum().backward()
        optimizer.step()
    """,
        "TD206",
    )
    assert found.fix is not None


def test_td206_quiet_for_super_and_own_forward() -> None:
    assert_marked(
        """
    from torch import nn
    class Base(nn.Module):
        def forward(self, x):
            return x
    class Child(Base):
        def forward(self, x):
            return super().forward(x) * 2
        def predict(self, x):
            return self.forward(x)
    """,
        "TD206",
    )


def test_td206_quiet_for_non_modules() -> None:
    assert_marked(
        """
    import torch
    class Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x
    def run(pipeline, handler, x):
        pipeline.forward(x)
        handler.forward(x)
        Function.forward(None, x)
    """,
        "TD206",
    )


def test_td206_quiet_for_explicit_base_class_call() -> None:
    assert_marked(
        """
    from torch import nn
    class Mine(nn.Linear):
        def forward(self, x):
            return nn.Linear.forward(self, x)
    """,
        "TD206",
    )


# --- TD207 parameter-data-mutated -------------------------------------------------------


def test_td207_flags_clamp_between_forward_and_backward() -> None:
    assert_marked(
        """
    def train(model, loader, opt, criterion):
        for x, y in loader:
            opt.zero_grad()
            loss = criterion(model(x), y)
            for p in model.parameters():
                p.data.clamp_(-0.01, 0.01)  # expect: TD207
            loss.backward()
            opt.step()
    """,
        "TD207",
    )


def test_td207_flags_assignment_through_data() -> None:
    assert_marked(
        """
    def step(model, x, mask):
        out = model(x)
        model.fc.weight.data = model.fc.weight.data * mask  # expect: TD207
        model.fc.bias.data[0] += 1  # expect: TD207
        out.sum().backward()
    """,
        "TD207",
    )


def test_td207_quiet_when_the_backward_is_in_an_exclusive_branch() -> None:
    """GradNorm: one branch backpropagates inside a helper, steps, and then renormalises
    the task weights through ``.data``; the plain backward is in the ``else`` branch and
    never follows it in the same pass. A backward after the ``if`` still does."""
    assert_marked(
        """
    def train(model, loader, opt, weights, method):
        for x, ys in loader:
            losses = [(model(x)[:, i] - ys[:, i]).pow(2).mean() for i in range(2)]
            if method == "gradnorm":
                opt.zero_grad()
                gradnorm(losses, weights)
                opt.step()
                total = sum([w.item() for w in weights])
                for w in weights:
                    w.data = w.data * 2 / total
            else:
                opt.zero_grad()
                sum(losses).backward()
                opt.step()

    def tune(model, x, weights, method):
        out = model(x)
        if method == "rescale":
            for w in model.parameters():
                w.data = w.data * 0.5  # expect: TD207
        out.sum().backward()
    """,
        "TD207",
    )


_REFILLED_INPUT = """
def train(text_encoder, generator, discriminator, loader, noise, opt):
    for captions, images in loader:
        embedding = text_encoder(captions).detach()
        {refill}
        fake = generator(noise, embedding)
        {late}
        loss = discriminator(fake).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_td207_quiet_for_an_input_refilled_before_the_forward_that_reads_it() -> None:
    """GAN noise redrawn through ``.data`` after the text encoder's forward but before
    the generator's, which reads it: no pending graph saw the old values."""
    source = _REFILLED_INPUT.format(refill="noise.data.normal_(0, 1)", late="")
    assert_marked(source, "TD207")


def test_td207_flags_the_same_input_changed_after_the_forward_read_it() -> None:
    source = _REFILLED_INPUT.format(refill="", late="noise.data.normal_(0, 1)  # expect: TD207")
    assert_marked(source, "TD207")


_FRESH_PERTURBATION = """
import torch
import torch.nn.functional as F
{imports}

def main(loader, epsilon, alpha):
    model = {build}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        delta = torch.zeros_like(x)
        delta.uniform_(-epsilon, epsilon)
        delta.data = torch.max(torch.min(delta, 1 - x), -x)
        delta.requires_grad = True
        loss = F.cross_entropy(model(x + delta), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


@pytest.mark.parametrize(
    ("imports", "build"),
    [
        ("from preact_resnet import PreActResNet18", "PreActResNet18().cuda()"),
        ("from torchvision.models import resnet18", "resnet18(num_classes=10)"),
        ("class Net(torch.nn.Linear):\n    pass", "Net(4, 2)"),
    ],
)
def test_td207_building_a_model_is_no_forward_pass(imports: str, build: str) -> None:
    """fast_adversarial's FGSM: the perturbation is clamped through ``.data`` before the
    forward that reads it; the model's construction before the loop is not a forward."""
    assert_marked(_FRESH_PERTURBATION.format(imports=imports, build=build), "TD207")


def test_td207_quiet_for_another_models_parameters() -> None:
    """Casting a teacher's (or an EMA copy's) parameters through ``.data`` between the
    student's forward and backward touches nothing in the student's graph."""
    assert_marked(
        """
    import torch
    from torch import nn
    def train(student: nn.Module, teacher: nn.Module, loader, opt, criterion):
        for x, y in loader:
            opt.zero_grad()
            loss = criterion(student(x), y)
            for p in teacher.parameters():
                p.data = p.data.to(torch.bfloat16)
            teacher.head.weight.data = teacher.head.weight.data.half()
            loss.backward()
            opt.step()
    """,
        "TD207",
    )


def test_td207_flags_the_trained_models_parameters_beside_another_models() -> None:
    assert_marked(
        """
    from torch import nn
    def train(student: nn.Module, teacher: nn.Module, x, opt):
        out = student(x)
        for p in student.parameters():
            p.data = p.data.half()  # expect: TD207
        for q in teacher.parameters():
            q.data = q.data.half()
        out.sum().backward()
    """,
        "TD207",
    )


def test_td207_quiet_after_step_and_at_initialisation() -> None:
    assert_marked(
        """
    import torch
    def train(model, loader, opt, criterion):
        for p in model.parameters():
            p.data.normal_(0, 0.02)
        for x, y in loader:
            opt.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            opt.step()
            for p in model.parameters():
                p.data.clamp_(-0.01, 0.01)
    """,
        "TD207",
    )


def test_td207_quiet_for_a_name_bound_to_new_memory_after_the_forward() -> None:
    """SABR's attack: after a forward on the first ``X_pgd``, the name is bound to a new
    leaf, ``Variable(X_pgd.data + noise, requires_grad=True)``, and only then written
    through ``.data``; the forward that backward differentiates comes later. What the
    first forward used is another tensor. A name bound to a view of itself shares its
    memory, and the write still changes what the forward saved."""
    assert_marked(
        """
    from torch.autograd import Variable

    def attack(model, X, noise, found, best):
        X_pgd = Variable(X.data, requires_grad=True)
        shape = model(X_pgd).shape
        X_pgd = Variable(X_pgd.data + noise, requires_grad=True)
        X_pgd.data[found] = best[found]
        model(X_pgd).sum().backward()

    def viewed(model, X, mask):
        out = model(X)
        X = X.view(X.shape[0], -1)
        X.data[mask] = 0  # expect: TD207
        out.sum().backward()
    """,
        "TD207",
    )


def test_td207_quiet_for_gradient_data_and_reads() -> None:
    assert_marked(
        """
    def train(model, x, opt):
        out = model(x)
        for p in model.parameters():
            p.grad.data.zero_()
            norm = p.data.norm()
        out.sum().backward()
    """,
        "TD207",
    )


def test_td207_quiet_without_a_backward_after_it() -> None:
    assert_marked(
        """
    def ema_update(model, ema, x):
        out = model(x)
        for p, q in zip(model.parameters(), ema.parameters()):
            q.data.mul_(0.99).add_(p.data, alpha=0.01)
        return out
    """,
        "TD207",
    )


def test_td207_flags_an_activation_changed_through_data_inside_forward() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    class Pool(nn.Module):
        def __init__(self):
            super().__init__()
            self.score = nn.Linear(8, 1)
        def forward(self, x, pad):
            attn = torch.softmax(self.score(x).squeeze(-1), dim=-1)
            attn.data.masked_fill_(pad, 0.0)  # expect: TD207
            gate = torch.sigmoid(self.score(x))
            gate.data[pad] = 0.0  # expect: TD207
            return (attn.unsqueeze(-1) * x).sum(1) + gate.sum()
    """,
        "TD207",
    )


def test_td207_quiet_for_fresh_buffers_parameters_and_unsaved_outputs_in_forward() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
        def forward(self, x, pad):
            mask = torch.zeros(x.shape[0], 8)
            mask.data.fill_(1.0)
            self.fc.weight.data.clamp_(-1, 1)
            energies = self.fc(x)
            energies.data.masked_fill_(pad, -1e9)
            out = torch.softmax(energies, dim=-1)
            with torch.no_grad():
                out.data.clamp_(-5, 5)
            return out * mask
    """,
        "TD207",
    )


@pytest.mark.parametrize(
    "call",
    [
        "logits = model.forward(x)",
        "logits = self.encoder.forward(x)",
        "logits = (lambda v: model.forward(v))(x)",
    ],
)
def test_td206_is_information_where_no_hook_is_attached(call: str) -> None:
    """Without a hook, ``forward()`` and ``__call__`` compute the same: a maintainer leaves
    it; the finding stays visible as information."""
    (found,) = lint_findings(
        f"""
    from torch import nn
    class Trainer:
        def __init__(self):
            self.encoder = nn.Linear(4, 2)
        def step(self, model: nn.Linear, x, optimizer):
            {call}
            logits.sum().backward()
            optimizer.step()
    """,
        "TD206",
    )
    assert found.severity is Severity.INFO
    assert "attaches no hook" in found.message


@pytest.mark.parametrize(
    "mention",
    [
        "# the offsets refine the quantization step",
        '"""Pruning and weight_norm are future work; accelerate later."""',
        "self._stequantization = None",
        "prune_ratio = 0.5",
    ],
)
def test_td206_words_in_comments_or_longer_names_attach_no_hook(mention: str) -> None:
    """Only code attaches a hook: a comment or docstring about quantization or pruning,
    or an identifier that merely contains such a word, does not make it a warning."""
    (found,) = lint_findings(
        f"""
    from torch import nn
    class Coder(nn.Module):
        def __init__(self):
            super().__init__()
            {mention}
            self.offsets = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
        def step(self, x):
            return self.offsets.forward(x)
    """,
        "TD206",
    )
    assert found.severity is Severity.INFO


@pytest.mark.parametrize(
    "attach",
    [
        "model.register_forward_hook(lambda m, i, o: None)",
        "model.register_forward_pre_hook(lambda m, i: None)",
        "nn.utils.spectral_norm(model)",
        "torch.nn.utils.prune.l1_unstructured(model, 'weight', 0.5)",
    ],
)
def test_td206_is_a_warning_where_the_file_attaches_a_hook(attach: str) -> None:
    (found,) = lint_findings(
        f"""
    import torch
    from torch import nn
    def train(model: nn.Linear, x, optimizer):
        {attach}
        model.forward(x).sum().backward()
        optimizer.step()
    """,
        "TD206",
    )
    assert found.severity is Severity.WARNING


@pytest.mark.parametrize(
    "mlp_call, texture_call, severity",
    [
        ("self.net(x)", "self.net.forward(x)", Severity.INFO),  # the MLP: nothing hooks it
        ("self.net.forward(x)", "self.net(x)", Severity.WARNING),  # its hooked Sequential
    ],
)
def test_td206_a_hook_on_another_class_attribute_of_the_same_name(
    mlp_call: str, texture_call: str, severity: Severity
) -> None:
    """nvdiffrec: ``_MLP`` hooks its own ``self.net`` (a Sequential) and
    ``MLPTexture3D.sample`` calls ``self.net.forward(x)``, where ``self.net`` is the
    ``_MLP``: another object, whose forward still calls the hooked Sequential."""
    source = f"""
    from torch import nn
    class MLP(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
            self.net.register_full_backward_hook(lambda m, gi, go: (gi[0] * scale,))
        def forward(self, x):
            return {mlp_call}
    class Texture(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = MLP(128.0)
        def sample(self, x):
            return {texture_call}
    """
    assert [f.severity for f in lint_findings(source, "TD206")] == [severity]
    # a subclass of the hooking class calls the same, hooked attribute
    subclass = (
        source
        + """
    class ScaledMLP(MLP):
        def step(self, x, optimizer):
            self.net.forward(x).sum().backward()
            optimizer.step()
    """
    )
    found = lint_findings(subclass, "TD206")
    assert [f.severity for f in found if f.location.line == 19] == [Severity.WARNING]


# Round 4's false class: hooks attached to the model's layers, not to the model. Its
# `forward()` still calls each layer through `__call__`, so their hooks run.
@pytest.mark.parametrize(
    "attach",
    [
        # leaf layers gathered by a recursive helper into a list (an optimizer's Jacobians)
        """
        self.layers = []
        self.collect(model)
        for layer in self.layers:
            layer.register_forward_hook(keep_input)""",
        # one named layer
        """
        model.head.register_forward_hook(keep_input)""",
        # the direct children
        """
        for child in model.children():
            child.register_forward_pre_hook(lambda m, i: None)""",
        # a list of layers written out, with weight norm on one of them
        """
        for layer in [model.body, model.head]:
            layer.register_forward_hook(keep_input)
        nn.utils.weight_norm(model.head)""",
    ],
)
def test_td206_hooks_on_the_models_layers_are_information(attach: str) -> None:
    (found,) = lint_findings(
        f"""
    from torch import nn
    def keep_input(module, inputs, output):
        module.last_input = inputs[0]
    class Trainer:
        def collect(self, module):
            for child in module.children():
                self.layers.append(child)
        def __init__(self, model: nn.Module, optimizer):
            self.model = model
            self.optimizer = optimizer{textwrap.indent(attach, "    ")}
        def step(self, x):
            self.model.forward(x).sum().backward()
            self.optimizer.step()
    """,
        "TD206",
    )
    assert found.severity is Severity.INFO
    assert "not shown to be on `self.model` itself" in found.message


@pytest.mark.parametrize(
    "attach",
    [
        "model.register_forward_hook(keep_input)",
        "self.model.register_forward_pre_hook(lambda m, i: None)",
        "for layer in model.modules():\n    layer.register_forward_hook(keep_input)",
        "for name, layer in self.model.named_modules():\n"
        "    layer.register_forward_hook(keep_input)",
        "nn.modules.module.register_module_forward_hook(keep_input)",
    ],
)
def test_td206_a_hook_on_the_model_itself_is_a_warning(attach: str) -> None:
    """``modules()`` and ``named_modules()`` yield the module itself first, and a global
    module hook reaches every module: the model's own hook is skipped."""
    (found,) = lint_findings(
        f"""
    from torch import nn
    def keep_input(module, inputs, output):
        module.last_input = inputs[0]
    class Trainer:
        def __init__(self, model: nn.Module, optimizer):
            self.model = model
            self.optimizer = optimizer
{textwrap.indent(attach, "            ")}
        def step(self, x):
            self.model.forward(x).sum().backward()
            self.optimizer.step()
    """,
        "TD206",
    )
    assert found.severity is Severity.WARNING


@pytest.mark.parametrize(
    "engine",
    [
        "import deepspeed\nengine, _, _, _ = deepspeed.initialize(model=model, config=config)",
        "from torch.ao import quantization\nquantization.prepare(model.head, inplace=True)",
    ],
)
def test_td206_an_engine_named_in_the_file_is_no_proof_of_a_hook(engine: str) -> None:
    """Round 34 (MeZO): a trainer that may hand the model to DeepSpeed later calls
    ``model.forward`` first to read a layer's hook. The engine's name shows no hook on the
    module called here: information, saying so."""
    (found,) = lint_findings(
        f"""
    from torch import nn
    def features(model: nn.Module, x, config):
        store = {{}}
        model.head.register_forward_hook(lambda m, i, o: store.update(x=i[0]))
        model.forward(x)
{textwrap.indent(engine, "        ")}
        return store["x"]
    """,
        "TD206",
    )
    assert found.severity is Severity.INFO
    assert "nothing here shows `model` is one of them" in found.message


def test_td206_fully_shard_on_the_model_is_a_warning() -> None:
    """FSDP2 unshards a module's parameters in a pre-hook on that module: calling its
    ``forward`` directly skips the unshard."""
    (found,) = lint_findings(
        """
    from torch import nn
    from torch.distributed.fsdp import fully_shard
    def train(model: nn.Module, x, optimizer):
        fully_shard(model)
        model.forward(x).sum().backward()
        optimizer.step()
    """,
        "TD206",
    )
    assert found.severity is Severity.WARNING


def test_td207_an_accumulator_set_to_zero_starts_no_forward_pass() -> None:
    """DomainBed's TRM: ``loss_swap = 0.0`` opens ``update()``, classifiers' weights are
    copied through ``.data`` next, and only then run forward; the number assigned to a
    name backpropagated later is no forward pass the copy could follow."""
    assert_marked(
        """
    import copy
    import torch.nn.functional as F
    class TRM:
        def update(self, minibatches):
            loss_swap = 0.0
            for classifier in self.clist:
                classifier.weight.data = copy.deepcopy(self.classifier.weight.data)
            loss_erm = 0.0
            for j, (x, y) in enumerate(minibatches):
                loss_erm += F.cross_entropy(self.clist[j](self.featurizer(x)), y)
            loss_erm.backward()
            loss_swap = F.cross_entropy(self.classifier(self.featurizer(x)), y)
            loss_swap.backward()
    """,
        "TD207",
    )
