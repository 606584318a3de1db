"""An agent module that builds its optimizer first and its loss functions after it.

A loss module (`nn.MSELoss`, `nn.CrossEntropyLoss` with class weights) holds no
parameters: its class weights are a buffer. Assigning one onto the module after the
optimizer was built from `self.parameters()` leaves the optimizer missing nothing.
"""

import torch
from torch import nn

STATE, ACTIONS = 8, 4


class Agent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(STATE, 32)
        self.policy = nn.Linear(32, ACTIONS)
        self.value = nn.Linear(32, 1)
        self.optimizer = torch.optim.Adam(self.parameters(), lr=1e-3)
        self.value_loss = nn.MSELoss()
        self.policy_loss = nn.CrossEntropyLoss(weight=torch.ones(ACTIONS))

    def learn(self, states: torch.Tensor, actions: torch.Tensor, returns: torch.Tensor) -> float:
        hidden = torch.relu(self.body(states))
        loss = self.policy_loss(self.policy(hidden), actions)
        loss = loss + self.value_loss(self.value(hidden).squeeze(1), returns)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main() -> None:
    torch.manual_seed(0)
    agent = Agent()
    states = torch.randn(64, STATE)
    actions = torch.randint(0, ACTIONS, (64,))
    returns = states.sum(dim=1)
    for _ in range(20):
        loss = agent.learn(states, actions, returns)
    print(f"final loss {loss:.4f}")


if __name__ == "__main__":
    main()
