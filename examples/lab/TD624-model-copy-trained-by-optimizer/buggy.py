"""A DQN agent whose target network is trained by the optimizer along with the Q-network.

The agent module holds both networks, and the optimizer is built from all of the agent's
parameters. The bootstrap target is computed with its graph, so the target network gets
gradients and Adam moves it at every step, on top of the soft update that should be the
only thing changing it.
"""

import copy

import torch
from torch import nn


class Agent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q_net = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 2))
        self.target_net = copy.deepcopy(self.q_net)  # expect[run]: TD624

    @torch.no_grad()
    def soft_update(self, tau: float = 0.05) -> None:
        for target_p, p in zip(self.target_net.parameters(), self.q_net.parameters()):
            target_p.lerp_(p, tau)


def transitions(generator: torch.Generator, size: int = 64) -> tuple[torch.Tensor, ...]:
    """A chain of 6 states; action 1 moves right, the last state pays 1."""
    states = torch.randint(0, 6, (size,), generator=generator)
    actions = torch.randint(0, 2, (size,), generator=generator)
    following = (states + 2 * actions - 1).clamp(0, 5)
    encode = lambda s: nn.functional.one_hot(s, 6).float()  # noqa: E731
    return encode(states), actions, (following == 5).float(), encode(following)


def main() -> None:
    torch.manual_seed(0)
    agent = Agent()
    optimizer = torch.optim.Adam(agent.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(4)
    for _ in range(300):
        states, actions, rewards, following = transitions(generator)
        target = rewards + 0.9 * agent.target_net(following).max(1).values
        q = agent.q_net(states).gather(1, actions[:, None]).squeeze(1)
        loss = nn.functional.mse_loss(q, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        agent.soft_update()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
