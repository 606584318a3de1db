"""A hypergraph recommender whose callers choose the dropout rate with every call.

``forward`` takes the keep rate as an argument and drops ``1 - keep_rate`` of the
hyperedge weights with functional dropout. Training passes the configured keep rate;
prediction passes 1.0, so the rate is 0 and evaluation drops nothing. The mode is carried
by the argument, not by ``self.training``.
"""

import torch
import torch.nn.functional as F
from torch import nn


class HypergraphRecommender(nn.Module):
    def __init__(self, users: int, items: int, dim: int = 8, keep_rate: float = 0.7) -> None:
        super().__init__()
        self.keep_rate = keep_rate
        self.user_embeds = nn.Parameter(torch.randn(users, dim) * 0.1)
        self.item_embeds = nn.Parameter(torch.randn(items, dim) * 0.1)
        self.hyper = nn.Parameter(torch.randn(dim, 4) * 0.1)

    def forward(self, keep_rate: float) -> tuple[torch.Tensor, torch.Tensor]:
        hyper = F.dropout(self.hyper, p=1 - keep_rate)
        users = self.user_embeds + self.user_embeds @ hyper @ hyper.T
        items = self.item_embeds + self.item_embeds @ hyper @ hyper.T
        return users, items

    def loss(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
        user_embeds, item_embeds = self.forward(self.keep_rate)
        u = user_embeds[users]
        margin = (u * item_embeds[pos]).sum(-1) - (u * item_embeds[neg]).sum(-1)
        return -F.logsigmoid(margin).mean()

    def predict(self, users: torch.Tensor) -> torch.Tensor:
        user_embeds, item_embeds = self.forward(1.0)
        return user_embeds[users] @ item_embeds.T


def main() -> None:
    torch.manual_seed(0)
    model = HypergraphRecommender(users=20, items=30)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for step in range(5):
        users, pos, neg = (torch.randint(0, n, (16,)) for n in (20, 30, 30))
        loss = model.loss(users, pos, neg)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        first, second = model.predict(torch.arange(3)), model.predict(torch.arange(3))
    print("evaluation is deterministic:", torch.equal(first, second))


if __name__ == "__main__":
    main()
