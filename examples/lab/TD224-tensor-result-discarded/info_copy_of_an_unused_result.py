"""A matrix-multiply benchmark that ends each timing with a copy nobody keeps.

Each timing function computes the product into the module-level `c`, stops the clock,
then calls `c.to("cpu")` as if to fetch it. The copy is thrown away, but nothing ever reads
`c` again: the call is a no-op that changes no result. True, and left as information.
"""

import time

import torch

c = None


def measure(a: torch.Tensor, b: torch.Tensor, steps: int) -> float:
    global c
    start = time.perf_counter()
    for _ in range(steps):
        c = torch.mm(a, b)
    end = time.perf_counter()
    c.to("cpu")  # expect: TD224
    return end - start


def main() -> None:
    torch.manual_seed(0)
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    seconds = measure(a, b, steps=20)
    print(f"{2 * 64**3 * 20 / seconds / 1e9:.2f} GFLOP/s")


if __name__ == "__main__":
    main()
