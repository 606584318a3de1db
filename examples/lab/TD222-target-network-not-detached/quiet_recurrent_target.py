"""A recurrent Q-learner whose target network returns (values, hidden state).

The target's values go through a helper that builds the discounted returns, and are
detached where they enter the loss: backward() never reaches the target network, which
follows the online one by copying its weights.
"""

import copy

import torch
from torch import nn
from torch.nn import functional as F

STATES, ACTIONS, HIDDEN, GAMMA = 6, 3, 16, 0.9


class RecurrentQ(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(STATES, HIDDEN)
        self.head = nn.Linear(HIDDEN, ACTIONS)

    def forward(self, states: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.cell(states, hidden)
        return self.head(hidden), hidden


class Learner:
    def __init__(self) -> None:
        self.agent = RecurrentQ()
        self.target_agent = copy.deepcopy(self.agent)
        self.optimizer = torch.optim.Adam(self.agent.parameters(), lr=1e-2)

    def _returns(self, rewards: torch.Tensor, next_values: torch.Tensor) -> torch.Tensor:
        return rewards + GAMMA * next_values

    def update(self, states: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor, next_states: torch.Tensor) -> float:
        hidden = torch.zeros(states.shape[0], HIDDEN)
        q_values, next_hidden = self.agent(states, hidden)
        chosen = q_values.gather(1, actions.unsqueeze(1)).squeeze(1)
        target_values, _ = self.target_agent(next_states, next_hidden.detach())
        targets = self._returns(rewards, target_values.max(dim=1).values)
        loss = F.mse_loss(chosen, targets.detach())
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def sync(self) -> None:
        self.target_agent.load_state_dict(self.agent.state_dict())


def main() -> None:
    torch.manual_seed(0)
    learner = Learner()
    for step in range(30):
        states, next_states = torch.randn(32, STATES), torch.randn(32, STATES)
        actions, rewards = torch.randint(0, ACTIONS, (32,)), torch.randn(32)
        loss = learner.update(states, actions, rewards, next_states)
        if step % 10 == 9:
            learner.sync()
    print(f"last loss {loss:.4f}")


if __name__ == "__main__":
    main()
