import torch
from common import batch, model_and_optimizer

model, _ = model_and_optimizer()
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
x, y = batch(0)


def closure():
    optimizer.zero_grad()
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    return loss


for _ in range(3):
    print(round(optimizer.step(closure).item(), 5))
torch.save(model.state_dict(), "state.pt")
