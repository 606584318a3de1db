import copy

from common import model_and_optimizer, train

model, optimizer = model_and_optimizer(optimizer="adam")
print("first", train(model, optimizer, steps=3))
ema = copy.deepcopy(model)  # an EMA / teacher copy, mid-training
for p in ema.parameters():
    p.requires_grad_(False)
print("second", train(model, optimizer, steps=3))
print("copy hooks", len(ema._forward_pre_hooks), [len(m._forward_hooks) for m in ema.modules()])
pairs = zip(ema.parameters(), model.parameters(), strict=True)
print("differs", any((a != b).any().item() for a, b in pairs))
