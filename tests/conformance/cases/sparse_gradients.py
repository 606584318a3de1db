import torch

torch.manual_seed(0)
embedding = torch.nn.Embedding(50, 8, sparse=True)
head = torch.nn.Linear(8, 1)
sparse = torch.optim.SparseAdam(list(embedding.parameters()), lr=1e-2)
dense = torch.optim.SGD(head.parameters(), lr=1e-2)
for step in range(5):
    tokens = torch.randint(0, 50, (16,))
    sparse.zero_grad()
    dense.zero_grad()
    loss = head(embedding(tokens)).pow(2).mean()
    loss.backward()
    sparse.step()
    dense.step()
    print(step, round(loss.item(), 5), embedding.weight.grad.is_sparse)
torch.save(embedding.state_dict(), "embedding.pt")
