"""A DQN trainer whose target network is never synced with the Q-network.

The trainer copies the Q-network into a target network and syncs it every 25 updates,
but the sync loads the target's own state dict: the targets are bootstrapped from the
initial, random Q-network for the whole run.
"""

import copy

import torch
from torch import nn


class Environment:
    """A chain of 6 states; action 1 moves right, the last state pays 1."""

    def __init__(self) -> None:
        self.generator = torch.Generator().manual_seed(4)

    def batch(self, size: int) -> tuple[torch.Tensor, ...]:
        states = torch.randint(0, 6, (size,), generator=self.generator)
        actions = torch.randint(0, 2, (size,), generator=self.generator)
        following = (states + 2 * actions - 1).clamp(0, 5)
        rewards = (following == 5).float()
        return self.encode(states), actions, rewards, self.encode(following)

    @staticmethod
    def encode(states: torch.Tensor) -> torch.Tensor:
        return nn.functional.one_hot(states, 6).float()


class DQNTrainer:
    def __init__(self, gamma: float = 0.9, sync_every: int = 25) -> None:
        self.q_net = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 2))
        self.target_net = copy.deepcopy(self.q_net)  # expect[run]: TD623
        self.optimizer = torch.optim.Adam(self.q_net.parameters(), lr=1e-2)
        self.env, self.gamma, self.sync_every = Environment(), gamma, sync_every
        self.updates = 0

    def _targets(self, rewards: torch.Tensor, following: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return rewards + self.gamma * self.target_net(following).max(1).values

    def _sync_target(self) -> None:
        self.target_net.load_state_dict(self.target_net.state_dict())

    def _update(self) -> float:
        states, actions, rewards, following = self.env.batch(64)
        q = self.q_net(states).gather(1, actions[:, None]).squeeze(1)
        loss = nn.functional.smooth_l1_loss(q, self._targets(rewards, following))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.updates += 1
        if self.updates % self.sync_every == 0:
            self._sync_target()
        return loss.item()

    def fit(self, updates: int) -> float:
        loss = 0.0
        for _ in range(updates):
            loss = self._update()
        return loss


def main() -> None:
    torch.manual_seed(0)
    trainer = DQNTrainer()
    print(f"final loss {trainer.fit(300):.4f}")


if __name__ == "__main__":
    main()
