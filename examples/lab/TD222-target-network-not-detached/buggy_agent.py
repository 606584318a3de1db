"""A Q-learning agent whose TD target is computed by a helper method with autograd on.

``learn()`` regresses Q(s, a) onto ``self._td_target(...)``, and the helper evaluates the
same network on the next states without ``torch.no_grad()``: backward() also pushes the
network toward its own target (a residual gradient), so the learned values are biased.
"""

import torch
from torch import nn
from torch.nn import functional as F

STATES, ACTIONS, GAMMA = 8, 3, 0.9


class Agent:
    def __init__(self) -> None:
        self.q = nn.Sequential(nn.Linear(STATES, 64), nn.ReLU(), nn.Linear(64, ACTIONS))
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=2e-3)

    def _td_target(self, rewards: torch.Tensor, next_states: torch.Tensor) -> torch.Tensor:
        next_q = self.q(F.one_hot(next_states, STATES).float()).max(1).values  # expect[lint]: TD222
        return rewards + GAMMA * next_q

    def learn(self, states: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor, next_states: torch.Tensor) -> float:
        q_values = self.q(F.one_hot(states, STATES).float())
        predicted = q_values.gather(1, actions.unsqueeze(1)).squeeze(1)
        target = self._td_target(rewards, next_states)
        loss = F.smooth_l1_loss(predicted, target)
        self.optimizer.zero_grad()
        loss.backward()  # expect[run]: TD222
        self.optimizer.step()
        return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    agent = Agent()
    rewards = torch.rand(STATES, ACTIONS)
    for step in range(200):
        states = torch.randint(0, STATES, (64,))
        actions = torch.randint(0, ACTIONS, (64,))
        next_states = torch.randint(0, STATES, (64,))
        loss = agent.learn(states, actions, rewards[states, actions], next_states)
    print(f"last loss {loss:.4f}")
