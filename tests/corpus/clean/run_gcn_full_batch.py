"""A graph convolutional network trained full-batch on a synthetic graph with a sparse,
normalised adjacency matrix and train/validation masks; evaluation under no_grad."""

import torch
import torch.nn.functional as F
from torch import nn


class GraphConv(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = nn.Linear(n_in, n_out, bias=False)

    def forward(self, features, adjacency):
        return torch.sparse.mm(adjacency, self.linear(features))


class GCN(nn.Module):
    def __init__(self, n_in, hidden, classes):
        super().__init__()
        self.conv1, self.conv2 = GraphConv(n_in, hidden), GraphConv(hidden, classes)

    def forward(self, features, adjacency):
        hidden = F.dropout(F.relu(self.conv1(features, adjacency)), 0.5, self.training)
        return F.log_softmax(self.conv2(hidden, adjacency), dim=1)


def make_graph(nodes=300, classes=3):
    labels = torch.randint(0, classes, (nodes,))
    features = F.one_hot(labels, classes).float().repeat(1, 4) + 0.8 * torch.randn(nodes, 12)
    src = torch.randint(0, nodes, (nodes * 4,))
    same = labels[torch.randint(0, nodes, (nodes * 4,))]
    dst = torch.stack([torch.nonzero(labels == c)[0, 0] for c in same.tolist()])
    edges = torch.cat([torch.stack([src, dst]), torch.arange(nodes).repeat(2, 1)], dim=1)
    values = torch.ones(edges.size(1))
    degree = torch.zeros(nodes).index_add_(0, edges[0], values)
    values = values / degree[edges[0]]
    adjacency = torch.sparse_coo_tensor(edges, values, (nodes, nodes)).coalesce()
    return features, labels, adjacency


def main():
    torch.manual_seed(0)
    features, labels, adjacency = make_graph()
    train_mask = torch.rand(len(labels)) < 0.6
    model = GCN(12, 16, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for epoch in range(60):
        model.train()
        optimizer.zero_grad()
        output = model(features, adjacency)
        loss = F.nll_loss(output[train_mask], labels[train_mask])
        loss.backward()
        optimizer.step()
        if epoch % 20 == 19:
            model.eval()
            with torch.no_grad():
                accuracy = (model(features, adjacency).argmax(1) == labels)[~train_mask]
            print(f"epoch {epoch}: validation accuracy {accuracy.float().mean().item():.2f}")


if __name__ == "__main__":
    main()
