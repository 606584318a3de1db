"""A DDPG-style update that computes both losses first, then steps the critic before
back-propagating the actor's loss through it.

`actor_loss` goes through `self.critic(...)`; `self.critic_optimizer.step()` then changes
the critic's weights in place, and `actor_loss.backward()` fails with "modified by an
inplace operation".
"""

import torch
from torch import nn


class Agent:
    def __init__(self, state_dim: int = 4, action_dim: int = 2, gamma: float = 0.99) -> None:
        self.actor = nn.Sequential(nn.Linear(state_dim, 32), nn.ReLU(), nn.Linear(32, action_dim), nn.Tanh())
        self.critic = nn.Sequential(nn.Linear(state_dim + action_dim, 32), nn.ReLU(), nn.Linear(32, 1))
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=1e-3)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=1e-3)
        self.gamma = gamma

    def train(self, batches: list[tuple[torch.Tensor, ...]]) -> None:
        for state, action, reward, next_state in batches:
            with torch.no_grad():
                next_q = self.critic(torch.cat([next_state, self.actor(next_state)], dim=1))
                target = reward + self.gamma * next_q
            q = self.critic(torch.cat([state, action], dim=1))
            critic_loss = nn.functional.mse_loss(q, target)
            actor_loss = -self.critic(torch.cat([state, self.actor(state)], dim=1)).mean()
            self.critic_optimizer.zero_grad()
            critic_loss.backward()
            self.critic_optimizer.step()
            self.actor_optimizer.zero_grad()
            actor_loss.backward()  # expect: TD228
            self.actor_optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    data = [(torch.randn(16, 4), torch.rand(16, 2) * 2 - 1, torch.randn(16, 1), torch.randn(16, 4)) for _ in range(4)]
    Agent().train(data)
