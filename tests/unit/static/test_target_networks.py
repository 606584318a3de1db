"""TD222 target-network-not-detached."""

from __future__ import annotations

import pytest

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings

HEADER = """
import copy
import torch
import torch.nn.functional as F
from torch import nn
"""


DQN_TARGET_WITH_GRAD = (
    HEADER
    + """
def dqn(q_net: nn.Module, loader):
    target_net = copy.deepcopy(q_net)
    opt = torch.optim.Adam(q_net.parameters())
    for s, r, s2 in loader:
        target = r + 0.9 * target_net(s2).max(1).values  # expect: TD222
        loss = F.mse_loss(q_net(s).max(1).values, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
)


def test_deepcopy_target_used_with_grad_is_flagged() -> None:
    assert_marked(DQN_TARGET_WITH_GRAD, "TD222")


def test_named_teacher_in_a_method_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
class Distiller:
    def __init__(self, student):
        self.student = student
        self.teacher = nn.Linear(4, 4)
        self.opt = torch.optim.SGD(student.parameters(), lr=0.1)

    def step(self, x):
        soft = self.teacher(x)  # expect: TD222
        loss = F.mse_loss(self.student(x), soft)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
""",
        "TD222",
    )


@pytest.mark.parametrize(
    "built, flagged",
    [
        ("nn.KLDivLoss(reduction='batchmean')", False),
        ("nn.MSELoss()", False),
        ("nn.Linear(4, 4)", True),
    ],
)
def test_a_loss_named_after_the_teacher_is_no_target_network(built: str, flagged: bool) -> None:
    """DG-Net's ``self.criterion_teacher = nn.KLDivLoss()``: a loss named after what it
    compares with is the student's objective, its output the value backward() must
    run through; a layer under that name is still a second network."""
    mark = "  # expect: TD222" if flagged else ""
    assert_marked(
        HEADER
        + f"""
class Distiller:
    def __init__(self, student):
        self.student = student
        self.criterion_teacher = {built}
        self.opt = torch.optim.SGD(student.parameters(), lr=0.1)

    def step(self, x, soft):
        loss = self.criterion_teacher(self.student(x), soft){mark}
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
""",
        "TD222",
    )


def test_no_grad_detach_and_frozen_targets_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def dqn(q_net: nn.Module, loader):
    target_net = copy.deepcopy(q_net)
    ema = copy.deepcopy(q_net)
    ema.requires_grad_(False)
    frozen_copy = copy.deepcopy(q_net)
    for p in frozen_copy.parameters():
        p.requires_grad = False
    opt = torch.optim.Adam(q_net.parameters())
    for s, r, s2 in loader:
        with torch.no_grad():
            a = target_net(s2)
        b = target_net(s2).detach()
        c = target_net(s2)
        c = c.detach()
        loss = F.mse_loss(q_net(s), a + b + c + ema(s2) + frozen_copy(s2))
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
            "TD222",
        )
        == []
    )


def test_trained_targets_eval_copies_and_unknown_networks_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def byol(online: nn.Module, target_encoder, loader):
    predictor = nn.Linear(4, 4)
    target_head = nn.Linear(4, 4)
    opt = torch.optim.Adam(list(online.parameters()) + list(target_head.parameters()))
    best = copy.deepcopy(online)
    for x in loader:
        loss = F.mse_loss(predictor(online(x)), target_encoder(x) + target_head(x))
        opt.zero_grad()
        loss.backward()
        opt.step()
    evaluate(best)

def evaluate(model):
    shadow = copy.deepcopy(model)
    return shadow(torch.zeros(1, 4))
""",
            "TD222",
        )
        == []
    )


def test_a_reference_copy_trained_on_its_own_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def compare(model: nn.Module, x):
    local_net = copy.deepcopy(model)
    out = model(x).sum()
    local_out = local_net(x).sum()
    out.backward()
    local_out.backward()
""",
            "TD222",
        )
        == []
    )


# --- a bootstrapped target from the network the loss trains ------------------------------


def test_a_bootstrapped_target_from_the_online_network_with_grad_is_flagged() -> None:
    assert_marked(
        """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    class Agent:
        def __init__(self):
            self.q_net = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))
            self.optimizer = torch.optim.Adam(self.q_net.parameters())
        def update(self, s, a, r, s2, done, gamma=0.99):
            q = self.q_net(s).gather(1, a.unsqueeze(1)).squeeze(1)
            q_next = self.q_net(s2).max(1)[0]  # expect: TD222
            q_target = r + gamma * q_next * (1 - done)
            loss = F.mse_loss(q, q_target)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
    def td_step(net: nn.Module, criterion: nn.SmoothL1Loss, batch, optimizer):
        s, r, s2 = batch
        criterion = nn.SmoothL1Loss()
        loss = criterion(net(s).max(1)[0], r + 0.9 * net(s2).max(1)[0])  # expect: TD222
        loss.backward()
        optimizer.step()
    """,
        "TD222",
    )


def test_a_detached_or_no_grad_target_or_a_consistency_loss_is_quiet() -> None:
    assert_marked(
        """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    def update(net: nn.Module, s, r, s2, optimizer):
        q = net(s).max(1)[0]
        with torch.no_grad():
            q_next = net(s2).max(1)[0]
        loss = F.mse_loss(q, r + 0.99 * q_next)
        loss.backward()
        detached = r + 0.99 * net(s2).max(1)[0].detach()
        F.mse_loss(q, detached).backward()
        F.mse_loss(net(s), net(s2)).backward()
        optimizer.step()
    """,
        "TD222",
    )


def test_a_mixup_of_the_networks_own_outputs_is_no_bootstrapped_target() -> None:
    """DomainBed's SelfReg: the target mixes two shuffles of the network's own outputs
    (``lam * out_2 + (1 - lam) * out_3``), a consistency term both sides of which train
    on purpose; a TD target adds a reward to the network's values."""
    assert_marked(
        """
    import torch
    import torch.nn as nn
    def update(net: nn.Module, x, lam, optimizer):
        output = net(x)
        output_2 = output[torch.randperm(len(x))]
        output_3 = output[torch.randperm(len(x))]
        output_3 = lam * output_2 + (1 - lam) * output_3
        loss = nn.MSELoss()(output, output_3)
        loss.backward()
        optimizer.step()
    """,
        "TD222",
    )


def test_an_input_optimised_through_an_ema_or_frozen_network_is_quiet() -> None:
    """GAN inversion, adversarial examples, feature visualisation: the optimizer holds a
    latent or an image, no network's parameters, so the gradient must cross the network."""
    assert (
        lint_codes(
            HEADER
            + """
def invert(g_ema: nn.Module, image, steps):
    latent = torch.zeros(1, 512, requires_grad=True)
    noises = []
    for shape in [(1, 1, 4, 4), (1, 1, 8, 8)]:
        noises.append(torch.randn(shape, requires_grad=True))
    opt = torch.optim.Adam([latent] + noises, lr=0.1)
    for _ in range(steps):
        fake = g_ema(latent)
        loss = F.mse_loss(fake, image)
        opt.zero_grad()
        loss.backward()
        opt.step()

def attack(model: nn.Module, x, y):
    teacher = copy.deepcopy(model)
    delta = torch.zeros_like(x, requires_grad=True)
    opt = torch.optim.SGD(params=[delta], lr=0.01)
    loss = -F.cross_entropy(teacher(x + delta), y)
    loss.backward()
    opt.step()
""",
            "TD222",
        )
        == []
    )


def test_an_ema_network_with_grad_beside_a_trained_network_is_still_flagged() -> None:
    assert_marked(
        HEADER
        + """
def train(g: nn.Module, d: nn.Module, z, image):
    g_ema = copy.deepcopy(g)
    latent = torch.zeros(1, 512, requires_grad=True)
    opt_latent = torch.optim.Adam([latent], lr=0.1)
    opt_g = torch.optim.Adam(g.parameters(), lr=0.1)
    target = g_ema(z)  # expect: TD222
    loss = F.mse_loss(g(z), target)
    opt_g.zero_grad()
    loss.backward()
    opt_g.step()
""",
        "TD222",
    )


# Round 5's TD3 and DDPG scripts: the target network's output is detached on the next
# line, inside a larger expression; nothing reaches the target networks.
DETACHED_LATER = {
    "plain loop": """
def fit(q_net: nn.Module, loader, gamma=0.99):
    target_net = copy.deepcopy(q_net)
    opt = torch.optim.Adam(q_net.parameters())
    for s, r, not_done, s2 in loader:
        target_q = target_net(s2)
        target_q = r + (not_done * gamma * target_q).detach()
        loss = F.mse_loss(q_net(s), target_q)
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
    "trainer class, nested target calls": """
class Agent:
    def __init__(self, actor, critic):
        self.actor, self.critic = actor, critic
        self.actor_target = copy.deepcopy(actor)
        self.critic_target = copy.deepcopy(critic)
        self.opt = torch.optim.Adam(critic.parameters())

    def train(self, s, a, r, s2, not_done, gamma=0.99):
        target_q = self.critic_target(s2, self.actor_target(s2))
        y = r + (not_done * gamma * target_q).detach()
        loss = F.mse_loss(self.critic(s, a), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
""",
    "closure handed to step": """
def fit(q_net: nn.Module, batches, gamma=0.9):
    target_net = copy.deepcopy(q_net)
    opt = torch.optim.LBFGS(q_net.parameters())
    for s, r, s2 in batches:
        def closure():
            opt.zero_grad()
            y = (r + gamma * target_net(s2).max(1).values).detach()
            loss = F.smooth_l1_loss(q_net(s).max(1).values, y)
            loss.backward()
            return loss
        opt.step(closure)
""",
    # Round 22's SAC: the target value enters a name that the loss reads detached.
    "derived value detached where the loss reads it": """
def fit(v_net: nn.Module, q_net: nn.Module, loader, gamma=0.99):
    target_v = copy.deepcopy(v_net)
    opt = torch.optim.Adam(q_net.parameters())
    for s, a, r, s2 in loader:
        target_value = target_v(s2)
        next_q = r + gamma * target_value
        q_loss = F.mse_loss(q_net(s, a), next_q.detach())
        opt.zero_grad()
        q_loss.backward()
        opt.step()
""",
    # Round 22's TD3: the target actor's action feeds the target critics, whose minimum
    # is detached inside a larger expression.
    "target action through target critics": """
class Agent:
    def __init__(self, actor, critic):
        self.actor, self.critic = actor, critic
        self.actor_target = copy.deepcopy(actor)
        self.critic_target = copy.deepcopy(critic)
        self.opt = torch.optim.Adam(critic.parameters())

    def train(self, s, a, r, s2, done, noise, gamma=0.99):
        next_action = self.actor_target(s2) + noise
        next_action = next_action.clamp(-1, 1)
        target_q1 = self.critic_target(s2, next_action)
        target_q = r + ((1 - done) * gamma * target_q1).detach()
        loss = F.mse_loss(self.critic(s, a), target_q)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
""",
    # Round 39's QMIX: a recurrent target agent returns (values, hidden); a helper builds
    # the TD(lambda) targets from them, detached where they enter the loss.
    "tuple result through a helper, detached at the loss": """
class Trainer:
    def __init__(self, agent: nn.Module, mixer: nn.Module):
        self.agent, self.mixer = agent, mixer
        self.target_agent = copy.deepcopy(agent)
        self.optimizer = torch.optim.Adam(agent.parameters())

    def update(self, s, s2, a, r, hidden):
        qtot = self.mixer(self.agent(s, a, hidden)[0], s)
        target_outs, _ = self.target_agent(s2, a, hidden)
        target_max = target_outs.max(dim=-1, keepdim=True)[0]
        targets = self._td_lambda(r, target_max)
        loss = F.mse_loss(qtot, targets.detach())
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
""",
}


def test_a_target_detached_inside_a_larger_expression_is_quiet() -> None:
    for shape, body in DETACHED_LATER.items():
        assert lint_codes(HEADER + body, "TD222") == [], shape


def test_a_target_derived_through_names_into_the_loss_is_still_flagged() -> None:
    assert_marked(
        HEADER
        + """
def fit(v_net: nn.Module, q_net: nn.Module, loader, gamma=0.99):
    target_v = copy.deepcopy(v_net)
    opt = torch.optim.Adam(q_net.parameters())
    for s, a, r, s2 in loader:
        target_value = target_v(s2)  # expect: TD222
        next_q = r + gamma * target_value
        scaled = next_q * 0.5
        q_loss = F.mse_loss(q_net(s, a), scaled)
        opt.zero_grad()
        q_loss.backward()
        opt.step()
""",
        "TD222",
    )


def test_a_target_unpacked_from_a_tuple_into_the_loss_is_still_flagged() -> None:
    assert_marked(
        HEADER
        + """
def fit(agent: nn.Module, loader, gamma=0.99):
    target_agent = copy.deepcopy(agent)
    opt = torch.optim.Adam(agent.parameters())
    for s, r, s2, hidden in loader:
        target_q, hidden = target_agent(s2, hidden)  # expect: TD222
        q, _ = agent(s, hidden)
        loss = F.mse_loss(q, r + gamma * target_q)
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
        "TD222",
    )


def test_a_target_detached_only_in_part_is_still_flagged() -> None:
    # The detached copy feeds a log line; the loss reads the value with its graph.
    assert_marked(
        HEADER
        + """
def fit(q_net: nn.Module, loader, gamma=0.99):
    target_net = copy.deepcopy(q_net)
    opt = torch.optim.Adam(q_net.parameters())
    for s, r, s2 in loader:
        target_q = r + gamma * target_net(s2)  # expect: TD222
        print((target_q - r).detach().mean())
        loss = F.mse_loss(q_net(s), target_q.mean(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
        "TD222",
    )


TD_HELPER = """
import torch
import torch.nn.functional as F
class Agent:
    def __init__(self):
        self.q = torch.nn.Linear(4, 2)
        self.optimizer = torch.optim.Adam(self.q.parameters())
    {decorator}
    def _target(self, rewards, next_states):
        next_q = self.q(next_states).max(1).values{mark}
        return rewards + 0.9 * next_q{detach}
    def learn(self, states, actions, rewards, next_states):
        predicted = self.q(states).gather(1, actions).squeeze(1)
        loss = F.mse_loss(predicted, self._target(rewards, next_states))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
"""


@pytest.mark.parametrize(
    "decorator, detach, flagged",
    [
        ("", "", True),  # the helper's target keeps the online network's graph
        ("@torch.no_grad()", "", False),
        ("", ".detach()", False),
    ],
)
def test_td222_follows_a_target_helper(decorator: str, detach: str, flagged: bool) -> None:
    mark = "  # expect: TD222" if flagged else ""
    source = TD_HELPER.format(decorator=decorator, detach=detach, mark=mark)
    assert_marked(source, "TD222")


PER_AGENT_TARGETS = (
    HEADER
    + """
class Critics:
    def __init__(self, critic: nn.Module, gamma=0.95):
        self.critic = critic
        self.target_critic = copy.deepcopy(critic)
        self.optimizer = torch.optim.Adam(self.critic.parameters())
        self.gamma = gamma

    def update(self, obs, rewards, next_obs):
        next_qs = self.target_critic(next_obs){mark}
        current = self.critic(obs)
        loss = 0
        for {loop}:
            target_q = rewards[i] + self.gamma * nq
            loss += F.mse_loss(q, target_q{detach})
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
"""
)


@pytest.mark.parametrize(
    "loop",
    [
        "i, nq, q in zip(range(3), next_qs, current)",
        "i, (nq, q) in enumerate(zip(next_qs, current))",
    ],
)
@pytest.mark.parametrize("detach, flagged", [(".detach()", False), ("", True)])
def test_td222_follows_a_target_drawn_element_by_element(
    loop: str, detach: str, flagged: bool
) -> None:
    # MAAC's attention critic: the target network's per-agent values are drawn by a zip
    # beside the online critic's; only what the target's elements reach counts.
    mark = "  # expect: TD222" if flagged else ""
    source = PER_AGENT_TARGETS.format(loop=loop, detach=detach, mark=mark)
    assert_marked(source, "TD222")


def test_the_message_names_the_cost_of_a_target_nothing_trains() -> None:
    """A target network in no optimizer does not move with the student: what its graph
    costs is a backward through it and a `.grad` nothing uses (PyCIL's DDPG)."""
    [found] = lint_findings(DQN_TARGET_WITH_GRAD, "TD222")
    assert "runs through the target network too" in found.message
    assert "a `.grad` that nothing uses" in found.message
    assert "moves with" not in found.message
