"""Fixed: the distance has a tiny epsilon under the square root (as
`torch.nn.functional.pairwise_distance` does), so its slope is finite at zero."""

import torch
from torch import nn

FEATURES, EMBEDDING = 32, 16


def make_pairs(count: int = 2048) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    anchors = torch.randn(count, FEATURES, generator=generator)
    similar = torch.rand(count, generator=generator) < 0.5
    others = torch.where(similar[:, None], anchors + 0.1 * torch.randn(
        count, FEATURES, generator=generator), torch.randn(count, FEATURES, generator=generator))
    others[::50] = anchors[::50]  # duplicated items: a pair of identical inputs
    return anchors, others, similar.float()


def distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.sqrt(((a - b) ** 2).sum(dim=1) + 1e-12)


def contrastive_loss(d: torch.Tensor, similar: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    return (similar * d ** 2 + (1 - similar) * torch.relu(margin - d) ** 2).mean()


def main() -> None:
    torch.manual_seed(0)
    anchors, others, similar = make_pairs()
    embed = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, EMBEDDING))
    optimizer = torch.optim.Adam(embed.parameters(), lr=1e-3)
    for step in range(60):
        batch = torch.randint(0, len(anchors), (128,))
        optimizer.zero_grad()
        d = distance(embed(anchors[batch]), embed(others[batch]))
        loss = contrastive_loss(d, similar[batch])
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
