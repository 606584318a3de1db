"""Cost of a full ``torchdoctor.check``, in plain training steps of the same model.

For a ResNet-18-sized CNN (11.2 M parameters, written out here so torchvision is not
needed) and a small Transformer encoder, this times one plain training step (forward,
loss, backward, optimizer step; median of several after a warm-up) and a full ``check``
(every probe, on a DataLoader, median of ``--repeats``), and prints their ratio with the
slowest probes. The aim is a check costing no more than about 30 plain steps. Run with
``python benchmarks/bench_check.py``.

Wall and CPU time are both printed: on a shared machine wall time depends on the other
processes, CPU time much less. The plain step is timed with torch's default thread count
and with one thread, and the faster counts (``check`` picks the faster the same way): on
a machine whose cores are busy, a multi-threaded step can be many times slower than a
single-threaded one, which would flatter the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import torchdoctor


class BasicBlock(nn.Module):
    """The two-convolution residual block of ResNet-18."""

    def __init__(self, channels_in: int, channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = nn.Sequential()
        if stride != 1 or channels_in != channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(channels_in, channels, 1, stride, bias=False), nn.BatchNorm2d(channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18's layout (64-128-256-512 channels, 2 blocks each) for 10 classes."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()
        )
        blocks, width = [], 64
        for channels, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(width, channels, stride), BasicBlock(channels, channels, 1)]
            width = channels
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


class Encoder(nn.Module):
    """A 4-layer Transformer encoder classifier over 64-token sequences."""

    def __init__(self, vocab: int = 5000, classes: int = 4) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, 128)
        self.positions = nn.Embedding(64, 128)
        layer = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 4)
        self.head = nn.Linear(128, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        return self.head(self.encoder(self.tokens(ids) + self.positions(positions)).mean(1))


def resnet_setup(batch: int) -> tuple[Any, ...]:
    model = ResNet18()
    images = torch.randn(batch * 4, 3, 32, 32)
    labels = torch.randint(0, 10, (batch * 4,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=batch, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def transformer_setup(batch: int) -> tuple[Any, ...]:
    model = Encoder()
    ids = torch.randint(0, 5000, (batch * 4, 64))
    labels = torch.randint(0, 4, (batch * 4,))
    loader = DataLoader(TensorDataset(ids, labels), batch_size=batch, shuffle=True)
    return model, loader, nn.CrossEntropyLoss(), torch.optim.AdamW(model.parameters(), 3e-4)


def step_seconds(setup: tuple[Any, ...], steps: int) -> tuple[float, float, int]:
    """Median wall and CPU time of one plain training step on the loader's first batch,
    at the faster of torch's default thread count and one thread (and that count)."""
    default = torch.get_num_threads()
    best: tuple[float, float, int] | None = None
    for threads in sorted({default, 1}, reverse=True):
        torch.set_num_threads(threads)
        try:
            wall, cpu = _median_step(setup, steps)
        finally:
            torch.set_num_threads(default)
        if best is None or wall < best[0]:
            best = (wall, cpu, threads)
    assert best is not None
    return best


def _median_step(setup: tuple[Any, ...], steps: int) -> tuple[float, float]:
    model, loader, loss_fn, optimizer = setup
    inputs, targets = next(iter(loader))
    walls, cpus = [], []
    for index in range(steps + 2):
        begin, begin_cpu = time.perf_counter(), time.process_time()
        optimizer.zero_grad()
        loss_fn(model(inputs), targets).backward()
        optimizer.step()
        if index >= 2:  # the first steps allocate optimizer state and warm caches
            walls.append(time.perf_counter() - begin)
            cpus.append(time.process_time() - begin_cpu)
    return statistics.median(walls), statistics.median(cpus)


def check_seconds(
    make: Callable[[int], tuple[Any, ...]], batch: int, repeats: int
) -> tuple[float, float, dict[str, Any]]:
    """Median wall and CPU time of a full check, and the facts of the last run."""
    walls, cpus, facts = [], [], {}
    for _ in range(repeats):
        torch.manual_seed(0)
        setup = make(batch)
        begin, begin_cpu = time.perf_counter(), time.process_time()
        report = torchdoctor.check(*setup)
        walls.append(time.perf_counter() - begin)
        cpus.append(time.process_time() - begin_cpu)
        facts = report.facts
    return statistics.median(walls), statistics.median(cpus), facts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}")
    for name, make in (("resnet18-size CNN", resnet_setup), ("transformer", transformer_setup)):
        torch.manual_seed(0)
        step, step_cpu, threads = step_seconds(make(args.batch), args.steps)
        total, total_cpu, facts = check_seconds(make, args.batch, args.repeats)
        slowest = sorted(facts["probe_seconds"].items(), key=lambda item: -item[1])[:4]
        print(
            f"{name:18s} step {step * 1000:8.1f} ms ({threads} threads, cpu "
            f"{step_cpu * 1000:.0f} ms)   check {total:6.2f} s (cpu {total_cpu:.2f} s, "
            f"{facts.get('threads', '?')} threads)   = {total / step:5.1f} steps "
            f"(cpu {total_cpu / step_cpu:5.1f})"
        )
        print("    slowest probes: " + ", ".join(f"{p} {s / step:.1f} steps" for p, s in slowest))


# --- the memory forecast: accuracy and cost ---------------------------------------------


class MLP(nn.Module):
    """A 4-layer MLP on 1024 features."""

    def __init__(self, width: int = 2048) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(1024, width),
            nn.ReLU(),
            nn.Linear(width, width),
            nn.ReLU(),
            nn.Linear(width, width),
            nn.ReLU(),
            nn.Linear(width, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention through ``scaled_dot_product_attention``."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, time_steps, width = x.shape
        q, k, v = (
            t.view(batch, time_steps, self.heads, width // self.heads).transpose(1, 2)
            for t in self.qkv(x).split(width, dim=2)
        )
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(batch, time_steps, width))


class GPTBlock(nn.Module):
    """Pre-norm Transformer block: attention and a 4x MLP, each with a residual."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attention = CausalSelfAttention(width, heads)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width), nn.Dropout(0.1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    """A decoder-only GPT the size of nanoGPT's character-level Shakespeare model (6 layers,
    6 heads, width 384, 256 tokens of context), with the output head tied to the token
    embedding."""

    def __init__(
        self, vocab: int = 65, width: int = 384, layers: int = 6, heads: int = 6, context: int = 256
    ) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(GPTBlock(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tokens.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def _sequence_loss(output: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(output.reshape(-1, output.shape[-1]), targets.reshape(-1))


def memory_setups() -> dict[str, Callable[[int], tuple[Any, ...]]]:
    """The benchmark models of the forecast: ``batch size -> (model, batch, loss, opt)``."""

    def mlp(batch: int) -> tuple[Any, ...]:
        model = MLP()
        return (
            model,
            (torch.randn(batch, 1024), torch.randint(0, 10, (batch,))),
            nn.CrossEntropyLoss(),
            torch.optim.Adam(model.parameters(), 1e-3),
        )

    def resnet(batch: int) -> tuple[Any, ...]:
        model = ResNet18()
        return (
            model,
            (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))),
            nn.CrossEntropyLoss(),
            torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        )

    def transformer(batch: int) -> tuple[Any, ...]:
        model = Encoder()
        return (
            model,
            (torch.randint(0, 5000, (batch, 64)), torch.randint(0, 4, (batch,))),
            nn.CrossEntropyLoss(),
            torch.optim.AdamW(model.parameters(), 3e-4),
        )

    def gpt(batch: int) -> tuple[Any, ...]:
        model = GPT()
        return (
            model,
            (torch.randint(0, 65, (batch, 256)), torch.randint(0, 65, (batch, 256))),
            _sequence_loss,
            torch.optim.AdamW(model.parameters(), 1e-3, weight_decay=0.1),
        )

    return {
        "MLP": mlp,
        "ResNet-18 CNN": resnet,
        "Transformer": transformer,
        "GPT (nanoGPT char)": gpt,
    }


def measured_peak(setup: tuple[Any, ...]) -> tuple[int, float]:
    """The CPU allocator's peak during one real training step (its second: the optimizer's
    state exists), and the step's wall time.

    The step runs under ``torch.profiler`` with ``profile_memory``: every allocation and
    free the CPU allocator makes is an event with its size. The peak is the bytes alive
    when the step starts (parameters, buffers, optimizer state, the batch) plus the
    highest running sum of those events. Gradients of the previous step are freed before
    the step (``zero_grad(set_to_none=True)``), as in the forecast.
    """
    from torch.profiler import ProfilerActivity, profile

    model, (inputs, targets), loss_fn, optimizer = setup

    def step() -> None:
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()

    optimizer.zero_grad(set_to_none=True)
    step()
    optimizer.zero_grad(set_to_none=True)
    tensors = [
        *model.parameters(),
        *model.buffers(),
        inputs,
        targets,
        *(
            value
            for state in optimizer.state.values()
            for value in state.values()
            if isinstance(value, torch.Tensor)
        ),
    ]
    start = sum(
        {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values()
    )
    begin = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    seconds = time.perf_counter() - begin
    events = sorted(
        (event for event in prof.profiler.kineto_results.events() if event.name() == "[memory]"),
        key=lambda event: event.start_ns(),
    )
    running = highest = 0
    for event in events:
        running += event.nbytes()
        highest = max(highest, running)
    return start + highest, seconds


def forecast_accuracy(batch: int) -> None:
    """Forecast vs the allocator's measured peak, per benchmark model."""
    from torchdoctor.preflight.batch import split_batch
    from torchdoctor.preflight.forecast import ForecastOptions, forecast_memory

    print(
        f"\nforecast accuracy (CPU, batch {batch}; measured: torch.profiler allocator "
        "events of one real step)"
    )
    print(
        f"{'model':20s} {'params':>8s} {'measured MiB':>13s} {'forecast MiB':>13s} "
        f"{'error':>7s} {'accelerate x4 MiB':>18s} {'its error':>9s}"
    )
    for name, make in memory_setups().items():
        torch.manual_seed(0)
        model, data, loss_fn, optimizer = make(batch)
        options = ForecastOptions("cpu", (batch,), remedies=False)
        forecast = forecast_memory(model, optimizer, loss_fn, split_batch(data), options)
        point = forecast.points[0]
        # The allocator's part: on the CPU the peak also counts the heap glibc keeps and the
        # process's one-time cost, which the allocator's own peak does not see.
        resident = point.breakdown.get("heap_retained", 0) + point.breakdown.get("process", 0)
        predicted = point.peak_bytes - resident
        actual, _ = measured_peak((model, data, loss_fn, optimizer))
        params = sum(p.numel() for p in model.parameters())
        rule = 4 * sum(p.numel() * p.element_size() for p in model.parameters())
        print(
            f"{name:20s} {params / 1e6:7.1f}M {actual / 2**20:13.1f} {predicted / 2**20:13.1f} "
            f"{(predicted - actual) / actual:+7.1%} {rule / 2**20:18.1f} "
            f"{(rule - actual) / actual:+9.1%}"
        )


def forecast_cost(sizes: tuple[int, ...], steps: int) -> None:
    """Wall time of a full forecast (the batch sizes, the largest batch that fits in 80 GiB,
    the remedies) against one real training step at the largest batch size."""
    from torchdoctor.preflight.batch import split_batch
    from torchdoctor.preflight.forecast import ForecastOptions, forecast_memory

    largest = max(sizes)
    print(
        f"\nforecast cost (batch sizes {','.join(map(str, sizes))}, 80 GiB CUDA, remedies "
        f"on; real step: median of {steps} at batch {largest}, after a warm-up)"
    )
    for name, make in memory_setups().items():
        torch.manual_seed(0)
        model, data, loss_fn, optimizer = make(largest)
        walls = []
        for index in range(steps + 1):
            begin = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(data[0]), data[1]).backward()
            optimizer.step()
            if index:
                walls.append(time.perf_counter() - begin)
        step = statistics.median(walls)
        torch.manual_seed(0)
        model, data, loss_fn, optimizer = make(min(sizes))
        options = ForecastOptions("cuda", sizes, device_memory=80 * 2**30)
        begin = time.perf_counter()
        forecast = forecast_memory(model, optimizer, loss_fn, split_batch(data), options)
        seconds = time.perf_counter() - begin
        print(
            f"{name:20s} forecast {seconds:6.2f} s   real step {step * 1000:8.1f} ms   "
            f"= {seconds / step:5.1f} steps   (largest batch in 80 GiB: "
            f"{forecast.largest_batch_size}, {len(forecast.remedies)} remedies)"
        )


def run_all() -> None:
    """``--section``: check (the default), forecast, or all."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", choices=("check", "forecast", "all"), default="check")
    parser.add_argument(
        "--forecast-batch", type=int, default=16, help="Batch size of the forecast accuracy table."
    )
    parser.add_argument("--forecast-steps", type=int, default=3)
    args, rest = parser.parse_known_args()
    if args.section in ("check", "all"):
        import sys

        sys.argv = [sys.argv[0], *rest]
        main()
    if args.section in ("forecast", "all"):
        forecast_accuracy(args.forecast_batch)
        forecast_cost((8, 16, 32, 64), args.forecast_steps)


if __name__ == "__main__":
    run_all()
