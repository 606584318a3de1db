"""Fitted Q-learning on a small stochastic MDP (12 states, 3 actions) from a
replay buffer of uniformly sampled transitions. The agent class keeps the
TD-target computation in its own helper."""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_S, N_A, GAMMA = 12, 3, 0.9


def make_mdp(seed):
    g = torch.Generator().manual_seed(seed)
    probs = torch.rand(N_S, N_A, N_S, generator=g) ** 2
    probs = probs / probs.sum(-1, keepdim=True)
    rewards = torch.randn(N_S, N_A, generator=g)
    return probs, rewards


def optimal_q(probs, rewards, iters=400):
    q = torch.zeros(N_S, N_A)
    for _ in range(iters):
        q = rewards + GAMMA * probs @ q.max(1).values
    return q


class Agent:
    def __init__(self):
        self.q = nn.Sequential(nn.Linear(N_S, 64), nn.ReLU(), nn.Linear(64, N_A))
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=2e-3)

    def _td_target(self, rewards, next_states):
        next_q = self.q(F.one_hot(next_states, N_S).float()).max(1).values
        return rewards + GAMMA * next_q

    def learn(self, states, actions, rewards, next_states):
        q_sa = self.q(F.one_hot(states, N_S).float()).gather(1, actions.unsqueeze(1)).squeeze(1)
        target = self._td_target(rewards, next_states)
        loss = F.smooth_l1_loss(q_sa, target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    probs, rewards = make_mdp(seed=5)
    q_star = optimal_q(probs, rewards)
    agent = Agent()
    g = torch.Generator().manual_seed(1)
    for it in range(1, 1001):
        s = torch.randint(0, N_S, (256,), generator=g)
        a = torch.randint(0, N_A, (256,), generator=g)
        s2 = torch.multinomial(probs[s, a], 1, generator=g).squeeze(1)
        loss = agent.learn(s, a, rewards[s, a], s2)
        if it % 250 == 0:
            with torch.no_grad():
                q = agent.q(torch.eye(N_S))
            err = (q - q_star).abs().mean().item()
            greedy = (q.argmax(1) == q_star.argmax(1)).float().mean().item()
            print(f"iter {it} loss={loss:.4f} mean|Q-Q*|={err:.4f} greedy_right_frac={greedy:.2f}")


if __name__ == "__main__":
    main()
