"""REINFORCE on a small corridor world, in the style of the PyTorch reinforcement-learning
example: sample actions from a `Categorical`, store log-probabilities, compute discounted
returns, standardise them and minimise `-(log_prob * return)`.

The policy "loss" is not an objective that should fall steadily: it is a surrogate whose
gradient is the policy gradient, and its value moves with the returns of each episode.
The reward per episode is what improves.
"""

import torch
from torch import nn
from torch.distributions import Categorical

LENGTH = 6
GAMMA = 0.95
MAX_STEPS = 20


class Corridor:
    """Start in the middle; +1 for reaching the right end, -0.01 per move."""

    def __init__(self, generator):
        self.generator = generator
        self.position = LENGTH // 2

    def reset(self):
        self.position = int(torch.randint(1, LENGTH - 1, (1,), generator=self.generator))
        return self.observe()

    def observe(self):
        return nn.functional.one_hot(torch.tensor(self.position), LENGTH).float()

    def step(self, action):
        self.position = max(0, min(LENGTH - 1, self.position + (1 if action == 1 else -1)))
        done = self.position in (0, LENGTH - 1)
        reward = 1.0 if self.position == LENGTH - 1 else (-0.5 if done else -0.01)
        return self.observe(), reward, done


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(LENGTH, 32), nn.Tanh(), nn.Linear(32, 2))

    def forward(self, observation):
        return self.net(observation)


def discounted_returns(rewards):
    returns, running = [], 0.0
    for reward in reversed(rewards):
        running = reward + GAMMA * running
        returns.insert(0, running)
    returns = torch.tensor(returns)
    return (returns - returns.mean()) / (returns.std(unbiased=False) + 1e-8)


def main():
    torch.manual_seed(0)
    env = Corridor(torch.Generator().manual_seed(55))
    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    running_reward = 0.0
    for episode in range(120):
        observation, log_probs, rewards = env.reset(), [], []
        for _ in range(MAX_STEPS):
            distribution = Categorical(logits=policy(observation))
            action = distribution.sample()
            log_probs.append(distribution.log_prob(action))
            observation, reward, done = env.step(action.item())
            rewards.append(reward)
            if done:
                break
        returns = discounted_returns(rewards)
        policy_loss = -(torch.stack(log_probs) * returns).sum()
        optimizer.zero_grad()
        policy_loss.backward()
        optimizer.step()
        running_reward = 0.95 * running_reward + 0.05 * sum(rewards)
        if episode % 30 == 0:
            print(f"episode {episode}: running reward {running_reward:.3f}")
    print(f"final running reward {running_reward:.3f}")


if __name__ == "__main__":
    main()
