"""A tiny Q-learning regressor and a distillation trainer with fixed targets.

The target network runs under `torch.no_grad()`; the teacher is frozen once with
`requires_grad_(False)`; the actor-critic detaches its targets' value on the next line,
inside the discounted term: backward() stops at the targets.
"""

import copy

import torch
from torch import nn

STATES, ACTIONS = 6, 3


def make_q_net() -> nn.Module:
    return nn.Sequential(nn.Linear(STATES, 32), nn.ReLU(), nn.Linear(32, ACTIONS))


def fit_q(steps: int = 50, gamma: float = 0.9) -> float:
    q_net = make_q_net()
    target_net = copy.deepcopy(q_net)
    optimizer = torch.optim.Adam(q_net.parameters(), lr=1e-3)
    loss = torch.zeros(())
    for step in range(steps):
        states, next_states = torch.randn(32, STATES), torch.randn(32, STATES)
        actions, rewards = torch.randint(0, ACTIONS, (32, 1)), torch.randn(32, 1)
        q = q_net(states).gather(1, actions)
        with torch.no_grad():
            best_next = target_net(next_states).max(1, keepdim=True).values
        loss = nn.functional.smooth_l1_loss(q, rewards + gamma * best_next)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            target_net.load_state_dict(q_net.state_dict())
    return loss.item()


class Distiller:
    def __init__(self) -> None:
        self.teacher = nn.Sequential(nn.Linear(STATES, 64), nn.ReLU(), nn.Linear(64, ACTIONS))
        self.teacher.requires_grad_(False)
        self.student = nn.Linear(STATES, ACTIONS)
        self.optimizer = torch.optim.SGD(self.student.parameters(), lr=0.1)

    def train_step(self, inputs: torch.Tensor) -> float:
        soft_targets = self.teacher(inputs).softmax(1)
        loss = nn.functional.kl_div(
            self.student(inputs).log_softmax(1), soft_targets, reduction="batchmean"
        )
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def fit(self, steps: int = 50) -> float:
        return [self.train_step(torch.randn(32, STATES)) for _ in range(steps)][-1]


def fit_by_hand(epochs: int = 3, lr: float = 0.1) -> float:
    """Not a teacher: a model trained by hand-written SGD (no optimizer) and evaluated in
    eval mode after each epoch. Its values move, so it is the model being trained."""
    model = nn.Sequential(nn.Linear(STATES, 32), nn.Tanh(), nn.Linear(32, 1))
    for _ in range(epochs):
        model.train()
        for _ in range(20):
            x = torch.randn(32, STATES)
            model.zero_grad()
            nn.functional.mse_loss(model(x), x[:, :1]).backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= lr * p.grad
        model.eval()
        with torch.no_grad():
            x = torch.randn(64, STATES)
            error = nn.functional.mse_loss(model(x), x[:, :1]).item()
    return error


class ActorCritic:
    """Deterministic actor-critic (TD3/DDPG style): the target networks' value is detached
    on the next line, inside the discounted term, before it reaches the loss."""

    def __init__(self) -> None:
        self.actor = nn.Sequential(nn.Linear(STATES, 32), nn.ReLU(), nn.Linear(32, 1), nn.Tanh())
        self.critic = nn.Sequential(nn.Linear(STATES + 1, 32), nn.ReLU(), nn.Linear(32, 1))
        self.actor_target = copy.deepcopy(self.actor)
        self.critic_target = copy.deepcopy(self.critic)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=1e-3)

    def value(self, critic: nn.Module, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return critic(torch.cat([states, actions], 1))

    def train_step(self, gamma: float = 0.99) -> float:
        states, next_states = torch.randn(32, STATES), torch.randn(32, STATES)
        actions, rewards = torch.rand(32, 1) * 2 - 1, torch.randn(32, 1)
        not_done = (torch.rand(32, 1) > 0.1).float()
        target_q = self.critic_target(
            torch.cat([next_states, self.actor_target(next_states)], 1)
        )
        target_q = rewards + (not_done * gamma * target_q).detach()
        loss = nn.functional.mse_loss(self.value(self.critic, states, actions), target_q)
        self.critic_optimizer.zero_grad()
        loss.backward()
        self.critic_optimizer.step()
        return loss.item()

    def fit(self, steps: int = 30) -> float:
        return [self.train_step() for _ in range(steps)][-1]


def main() -> None:
    torch.manual_seed(0)
    print(f"q-learning: {fit_q():.3f}  distillation: {Distiller().fit():.3f}")
    print(f"trained by hand: {fit_by_hand():.3f}  actor-critic: {ActorCritic().fit():.3f}")


if __name__ == "__main__":
    main()
