"""Federated rounds that keep last round's models, frozen, as fixed references.

Each round trains every client's model, then keeps a deep copy of all of them for the next
round's contrastive term (as MOON does). The copies are put in eval mode and every one of
their parameters is frozen in the same loop: they are references, never trained again,
even though the loop reuses the name `net`. The models that do train are never in eval mode.
"""

import copy

import torch
from torch import nn


def make_client() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.1), nn.ReLU(), nn.Linear(16, 3))


def main() -> None:
    torch.manual_seed(0)
    nets = {client: make_client() for client in range(3)}
    x, y = torch.randn(48, 8), torch.randint(0, 3, (48,))
    references: dict[int, nn.Module] = {}
    for round_index in range(2):
        for client, net in nets.items():
            optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
            for _ in range(5):
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(net(x), y)
                if client in references:
                    with torch.no_grad():
                        anchor = references[client](x)
                    loss = loss + 0.1 * nn.functional.mse_loss(net(x), anchor)
                loss.backward()
                optimizer.step()
        old_nets = copy.deepcopy(nets)
        for _, net in old_nets.items():
            net.eval()
            for param in net.parameters():
                param.requires_grad = False
        references = old_nets
        print(round_index, round(loss.item(), 4))


if __name__ == "__main__":
    main()
