"""A tiny Q-learning regressor and a distillation trainer whose targets keep their graph.

The target network is a `deepcopy` of the online network that no optimizer trains, but
its output goes into the loss with autograd on: backward() runs through it and fills
gradients nothing uses, a second backward pass on every step for a value meant as a
constant. The distillation trainer calls its teacher the same way from a method.
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
        best_next = target_net(next_states).max(1, keepdim=True).values  # expect: TD222
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
        self.student = nn.Linear(STATES, ACTIONS)
        self.optimizer = torch.optim.SGD(self.student.parameters(), lr=0.1)

    def train_step(self, inputs: torch.Tensor) -> float:
        soft_targets = self.teacher(inputs).softmax(1)  # expect: TD222
        loss = nn.functional.kl_div(self.student(inputs).log_softmax(1), soft_targets,
                                    reduction="batchmean")
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def fit(self, steps: int = 50) -> float:
        return [self.train_step(torch.randn(32, STATES)) for _ in range(steps)][-1]


def main() -> None:
    torch.manual_seed(0)
    print(f"q-learning: {fit_q():.3f}  distillation: {Distiller().fit():.3f}")


if __name__ == "__main__":
    main()
