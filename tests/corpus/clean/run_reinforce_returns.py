"""REINFORCE with normalised returns: log-probabilities kept in a list on the policy,
one backward per episode, the lists cleared after each update."""

import random

import torch
import torch.nn.functional as F
from torch import nn


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(3, 32)
        self.head = nn.Linear(32, 2)
        self.saved_log_probs, self.rewards = [], []

    def forward(self, state):
        return F.softmax(self.head(torch.relu(self.hidden(state))), dim=1)


def main():
    torch.manual_seed(0)
    rng = random.Random(0)
    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for episode in range(50):
        target = rng.randrange(2)
        for _ in range(10 + episode % 7):
            state = torch.tensor([[float(target), rng.random(), 1.0]])
            dist = torch.distributions.Categorical(policy(state))
            action = dist.sample()
            policy.saved_log_probs.append(dist.log_prob(action))
            policy.rewards.append(1.0 if action.item() == target else 0.0)
        returns, running = [], 0.0
        for reward in reversed(policy.rewards):
            running = reward + 0.9 * running
            returns.insert(0, running)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + 1e-6)
        terms = zip(policy.saved_log_probs, returns, strict=True)
        loss = torch.cat([-log_prob * ret for log_prob, ret in terms]).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        policy.saved_log_probs.clear()
        policy.rewards.clear()
    print("done")


if __name__ == "__main__":
    main()
