"""A resume that restores the random generators' states from their own file.

The states come from ``torch.get_rng_state()``, ``torch.cuda.get_rng_state_all()``,
numpy and Python; every one is a CPU byte tensor or plain data, whatever device trains,
and only the generators' setters read them back: no tensor can land on a GPU.
"""

import os
import random
import tempfile

import numpy as np
import torch


def save_rng_state(folder: str) -> None:
    states = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "cpu": torch.random.get_rng_state(),
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.random.get_rng_state_all()
    torch.save(states, os.path.join(folder, "rng_state.pth"))


def load_rng_state(folder: str) -> None:
    checkpoint_rng_state = torch.load(os.path.join(folder, "rng_state.pth"), weights_only=False)
    random.setstate(checkpoint_rng_state["python"])
    np.random.set_state(checkpoint_rng_state["numpy"])
    torch.random.set_rng_state(checkpoint_rng_state["cpu"])
    if torch.cuda.is_available():
        torch.cuda.random.set_rng_state_all(checkpoint_rng_state["cuda"])


def main() -> None:
    folder = tempfile.mkdtemp(prefix="td901-rng-")
    torch.manual_seed(0)
    save_rng_state(folder)
    first = torch.rand(3)
    load_rng_state(folder)
    again = torch.rand(3)
    print(f"same draws after restoring the generators: {torch.equal(first, again)}")


if __name__ == "__main__":
    main()
