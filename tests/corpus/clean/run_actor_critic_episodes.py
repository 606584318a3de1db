"""Actor-critic on a toy environment: one backward per episode of summed step losses.

Episodes get longer as the policy improves, so the summed loss grows: that is not
divergence.
"""

import random

import torch
import torch.nn.functional as F
from torch import nn


class Corridor:
    """Walk right to the end of a corridor; a wrong step ends the episode."""

    def __init__(self, length=30, seed=0):
        self.length = length
        self.rng = random.Random(seed)

    def reset(self):
        self.position = 0
        return self._state()

    def _state(self):
        return torch.tensor([self.position / self.length, self.rng.random(), 1.0, 0.0])

    def step(self, action):
        if action == 1:
            self.position += 1
            return self._state(), 1.0, self.position >= self.length
        return self._state(), 0.0, self.rng.random() < 0.5


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 32)
        self.policy = nn.Linear(32, 2)
        self.value = nn.Linear(32, 1)

    def forward(self, state):
        hidden = torch.relu(self.body(state))
        return F.softmax(self.policy(hidden), dim=-1), self.value(hidden)


def main():
    torch.manual_seed(0)
    env, model = Corridor(), ActorCritic()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
    for episode in range(60):
        state, log_probs, values, rewards, done = env.reset(), [], [], [], False
        while not done and len(rewards) < 60:
            probs, value = model(state)
            dist = torch.distributions.Categorical(probs)
            action = dist.sample()
            state, reward, done = env.step(action.item())
            log_probs.append(dist.log_prob(action))
            values.append(value.squeeze())
            rewards.append(reward)
        returns, running = [], 0.0
        for reward in reversed(rewards):
            running = reward + 0.99 * running
            returns.insert(0, running)
        returns = torch.tensor(returns)
        values = torch.stack(values)
        advantage = returns - values.detach()
        policy_loss = -(torch.stack(log_probs) * advantage).sum()
        value_loss = F.smooth_l1_loss(values, returns, reduction="sum")
        optimizer.zero_grad()
        (policy_loss + value_loss).backward()
        optimizer.step()
        if episode % 20 == 19:
            print(f"episode {episode}: length {len(rewards)}")


if __name__ == "__main__":
    main()
