"""A causal LM trained on its own samples, the loss computed by the training function.

The model follows the Hugging Face convention (given `labels`, its `forward` shifts them),
but it is never given any: `sampled_loss` calls it with `**batch` holding only
`input_ids` and `attention_mask`, shifts the sampled tokens once itself
(`labels = full_ids[:, 1:]`, masked where the prompt or the padding is), and compares
them with the logits in its own cross-entropy. One shift, so each position learns the
next token.
"""

import torch
from torch import nn

VOCAB = 16
PAD = 0


class TinyCausalLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 32, batch_first=True)
        self.head = nn.Linear(32, VOCAB)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> tuple:
        embedded = self.embed(input_ids)
        if attention_mask is not None:
            embedded = embedded * attention_mask.unsqueeze(-1)
        logits = self.head(self.rnn(embedded)[0])
        loss = None
        if labels is not None:
            shift_logits = logits[:, :-1].reshape(-1, VOCAB)
            shift_labels = labels[:, 1:].reshape(-1)
            loss = nn.functional.cross_entropy(shift_logits, shift_labels, ignore_index=-100)
        return logits, loss


def sample(model: TinyCausalLM, prompt: torch.Tensor, steps: int) -> torch.Tensor:
    """Extend the prompt by sampling the model's next tokens."""
    tokens = prompt
    with torch.no_grad():
        for _ in range(steps):
            logits, _ = model(tokens)
            next_token = torch.multinomial(logits[:, -1].softmax(-1), 1)
            tokens = torch.cat([tokens, next_token], dim=1)
    return tokens


def sampled_loss(model: TinyCausalLM, prompt: torch.Tensor) -> torch.Tensor:
    full_ids = sample(model, prompt, steps=8)
    input_ids = full_ids[:, :-1]
    mask = (input_ids != PAD).long()
    labels = full_ids[:, 1:]
    labels = torch.masked_fill(labels, mask == 0, -100)
    labels[:, : prompt.size(1) - 1] = -100
    batch = {"input_ids": input_ids, "attention_mask": mask}
    loss_fn = nn.CrossEntropyLoss(ignore_index=-100)
    logits, _ = model(**batch)
    return loss_fn(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))


def main() -> None:
    torch.manual_seed(0)
    model = TinyCausalLM()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(20):
        prompt = torch.randint(1, VOCAB, (16, 4))
        loss = sampled_loss(model, prompt)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 5 == 0:
            print(f"step {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
