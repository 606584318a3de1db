import torch
from common import model_and_optimizer, train

model, optimizer = model_and_optimizer()
print("losses", train(model, optimizer))
torch.save(model, "model.pt")  # the whole module, pickled
torch.save(model.state_dict(), "state.pt")
torch.save(
    {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": 5}, "checkpoint.pt"
)
again = torch.load("model.pt", weights_only=False)
print("reloaded", type(again).__name__, len(again._forward_pre_hooks), len(again._forward_hooks))
print("more", train(model, optimizer, steps=3))
