import warnings

import torch
from common import model_and_optimizer, train

warnings.filterwarnings("ignore", message="Complex modules")
for name in ("float16", "bfloat16", "float64", "complex64"):
    dtype = getattr(torch, name)
    model, optimizer = model_and_optimizer(dtype=dtype)
    model.register_buffer("seen", torch.zeros(3, dtype=torch.int64))
    model.frozen = torch.nn.Parameter(torch.arange(4, dtype=torch.int32), requires_grad=False)
    print(name, train(model, optimizer, steps=4, dtype=dtype))
    torch.save(model.state_dict(), f"{name}.pt")
