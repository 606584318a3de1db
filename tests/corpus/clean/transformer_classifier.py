"""A small Transformer encoder classifier with an attention mask, HF-style dict batches.

Batches are dicts (`input_ids`, `attention_mask`, `labels`); the model takes keyword
arguments. Weights are initialised BERT-style (truncated normal, zero biases, zero
position embeddings). AdamW uses two parameter groups: no weight decay on biases,
LayerNorm weights and embeddings. The schedule is the Hugging Face linear warm-up
(`get_linear_schedule_with_warmup`'s formula): the factor is `step / warmup`, so the very
first optimizer step runs at learning rate 0, then it rises and decays linearly.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB = 64
MAX_LEN = 16
PAD = 0


class Encoder(nn.Module):
    def __init__(self, dim=32, heads=4, layers=2, classes=3):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.position = nn.Parameter(torch.zeros(1, MAX_LEN, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.classifier = nn.Linear(dim, classes)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(self, input_ids, attention_mask):
        hidden = self.embedding(input_ids) + self.position[:, : input_ids.shape[1]]
        hidden = self.encoder(hidden, src_key_padding_mask=attention_mask == 0)
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (self.norm(hidden) * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        return self.classifier(pooled)


class CountingTask(Dataset):
    """Label = which of tokens 1, 2, 3 occurs most often (ties go to the smallest)."""

    def __init__(self, size, seed):
        generator = torch.Generator().manual_seed(seed)
        self.lengths = torch.randint(4, MAX_LEN + 1, (size,), generator=generator)
        self.tokens = torch.randint(1, 8, (size, MAX_LEN), generator=generator)

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, index):
        length = int(self.lengths[index])
        ids = torch.full((MAX_LEN,), PAD)
        ids[:length] = self.tokens[index, :length]
        mask = (torch.arange(MAX_LEN) < length).long()
        counts = torch.stack([(ids == token).sum() for token in (1, 2, 3)])
        return {"input_ids": ids, "attention_mask": mask, "labels": counts.argmax()}


def parameter_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        if parameter.ndim < 2 or "norm" in name or "embedding" in name or name == "position":
            no_decay.append(parameter)
        else:
            decay.append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def linear_schedule_with_warmup(optimizer, warmup_steps, total_steps):
    def factor(step):
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def build(steps_total):
    model = Encoder()
    optimizer = torch.optim.AdamW(parameter_groups(model, 0.01), lr=3e-3)
    scheduler = linear_schedule_with_warmup(optimizer, max(1, steps_total // 10), steps_total)
    return model, optimizer, scheduler


def make():
    torch.manual_seed(0)
    model, optimizer, _ = build(100)
    loader = DataLoader(CountingTask(64, seed=17), batch_size=32, shuffle=True)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main():
    torch.manual_seed(0)
    loader = DataLoader(CountingTask(256, seed=18), batch_size=32, shuffle=True)
    epochs = 2
    model, optimizer, scheduler = build(epochs * len(loader))
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        for batch in loader:
            labels = batch.pop("labels")
            optimizer.zero_grad()
            loss = criterion(model(**batch), labels)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
