import warnings

import torch
from common import model_and_optimizer, train

warnings.filterwarnings("ignore", message="quiet.*")
warnings.filterwarnings("error", message="fatal.*")
model, optimizer = model_and_optimizer()
for step in range(3):
    warnings.warn("quiet please", stacklevel=1)
    warnings.warn(f"loud {step % 2}", UserWarning, stacklevel=1)  # once per message
    train(model, optimizer, steps=1)
try:
    warnings.warn("fatal thing", stacklevel=1)
except UserWarning as error:
    print("raised", error)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    warnings.warn("recorded", stacklevel=1)
    torch.tensor([1.0]).resize_(2)  # a torch call inside the block
print("caught", [str(w.message) for w in caught])
