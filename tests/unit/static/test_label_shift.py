"""TD310 labels-shifted-twice."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_findings


def test_shifted_labels_for_a_hugging_face_causal_lm_are_flagged() -> None:
    source = """
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("gpt2")

        def collate(batch):
            input_ids = torch.stack(batch)
            labels = torch.full_like(input_ids, -100)
            labels[:, :-1] = input_ids[:, 1:]  # expect: TD310
            return {"input_ids": input_ids, "labels": labels}

        def step(batch):
            return model(**batch).loss
        """
    assert_marked(source, "TD310")
    (found,) = lint_findings(source, "TD310")
    assert found.evidence == {"model": "AutoModelForCausalLM"}


def test_shifted_labels_for_a_model_whose_forward_shifts_are_flagged() -> None:
    source = """
        import torch.nn.functional as F

        class LM:
            def forward(self, input_ids, labels=None):
                logits = self.body(input_ids)
                return F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())

        def loss_of(model, tokens):
            labels = tokens[:, 1:]  # expect: TD310
            return model(tokens[:, :-1], labels=labels)
        """
    assert_marked(source, "TD310")


def test_shifting_once_is_quiet() -> None:
    source = """
        import torch.nn.functional as F
        from transformers import GPT2LMHeadModel

        class GPT:
            def forward(self, idx, targets=None):
                logits = self.body(idx)
                return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

        def nanogpt_batch(data, i):
            x = data[i : i + 8]
            y = data[i + 1 : i + 9]
            return x, y

        def hf_step(model: GPT2LMHeadModel, input_ids):
            labels = input_ids.clone()
            return model(input_ids=input_ids, labels=labels).loss

        def own_loss(model: GPT2LMHeadModel, input_ids):
            logits = model(input_ids=input_ids).logits
            targets = input_ids[:, 1:]
            return F.cross_entropy(logits[:, :-1].flatten(0, 1), targets.flatten())
        """
    assert_marked(source, "TD310")


def test_shifted_labels_a_function_feeds_its_own_loss_are_quiet() -> None:
    # distillm's get_teacher_lm_loss: the model gets input_ids only, and the function
    # compares the logits with labels it shifted once itself.
    source = """
        import torch
        from torch import nn
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("gpt2")

        def sampled_loss(model, prompt, pad_id):
            full_ids = model.generate(**prompt, do_sample=True)
            input_ids = full_ids[:, :-1]
            mask = (input_ids != pad_id).long()
            labels = full_ids[:, 1:]
            labels = torch.masked_fill(labels, mask == 0, -100)
            labels[:, : prompt["input_ids"].size(1) - 1] = -100
            weights = (labels != -100).float()
            batch = {"input_ids": input_ids, "attention_mask": mask}
            loss_fn = nn.CrossEntropyLoss(ignore_index=-100)
            logits = model(**batch, use_cache=False).logits
            return loss_fn(logits.view(-1, logits.size(-1)), labels.view(-1)), weights
        """
    assert_marked(source, "TD310")


def test_shifted_labels_handed_on_by_the_function_are_flagged() -> None:
    source = """
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("gpt2")

        def into_the_batch(tokens):
            batch = {"input_ids": tokens}
            labels = tokens[:, 1:]  # expect: TD310
            labels = torch.masked_fill(labels, labels == 0, -100)
            batch["labels"] = labels
            return batch

        def returned(tokens):
            labels = tokens[:, 1:]  # expect: TD310
            return tokens, labels.contiguous()

        def aliased(tokens):
            labels = tokens[:, 1:]  # expect: TD310
            targets = labels
            return model(tokens, labels=targets).loss

        def step(batch):
            return model(**batch).loss
        """
    assert_marked(source, "TD310")
