"""A centralised critic for several agents, its target values drawn agent by agent.

The target critic returns one value per agent; a zip walks them beside the online
critic's values and each agent's reward. Each target enters the loss detached, so
backward() reaches only the online critic; the online values, drawn by the same zip,
keep their graph as they must.
"""

import copy

import torch
from torch import nn
from torch.nn import functional as F

AGENTS, FEATURES, GAMMA = 3, 8, 0.95


class Critic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleList(nn.Linear(FEATURES, 1) for _ in range(AGENTS))

    def forward(self, observations: torch.Tensor) -> list[torch.Tensor]:
        return [head(observations).squeeze(1) for head in self.heads]


class CentralCritic:
    def __init__(self) -> None:
        self.critic = Critic()
        self.target_critic = copy.deepcopy(self.critic)
        self.optimizer = torch.optim.Adam(self.critic.parameters(), lr=1e-2)

    def update(self, observations: torch.Tensor, rewards: torch.Tensor, next_observations: torch.Tensor) -> float:
        next_values = self.target_critic(next_observations)
        values = self.critic(observations)
        loss = torch.zeros(())
        for agent, next_value, value in zip(range(AGENTS), next_values, values):
            target = rewards[:, agent] + GAMMA * next_value
            loss = loss + F.mse_loss(value, target.detach())
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def sync(self) -> None:
        self.target_critic.load_state_dict(self.critic.state_dict())


if __name__ == "__main__":
    torch.manual_seed(0)
    learner = CentralCritic()
    for _ in range(5):
        observations = torch.randn(16, FEATURES)
        print(learner.update(observations, torch.randn(16, AGENTS), torch.randn(16, FEATURES)))
    learner.sync()
