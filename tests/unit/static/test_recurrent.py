"""TD109 rnn-output-read-batch-first."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked


def test_last_step_of_a_sequence_first_rnn_is_flagged() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(12, 64, 2)
            self.gru = nn.GRU(12, 64, batch_first=False)
            self.fc = nn.Linear(64, 10)
        def forward(self, x):
            out, _ = self.lstm(x)
            last = out[:, -1, :]  # expect: TD109
            seq = self.gru(x)[0]
            return self.fc(last) + self.fc(seq[:, -1])  # expect: TD109
    def encode(x):
        rnn = nn.RNN(8, 16)
        states, hidden = rnn(x)
        return states[:, -1]  # expect: TD109
    """,
        "TD109",
    )


def test_batch_first_layers_and_sequence_first_indexing_are_quiet() -> None:
    assert_marked(
        """
    import torch
    from torch import nn
    class Classifier(nn.Module):
        def __init__(self, batch_first):
            super().__init__()
            self.lstm = nn.LSTM(12, 64, batch_first=True)
            self.seq_first = nn.LSTM(12, 64)
            self.flagged = nn.GRU(12, 64, batch_first=batch_first)
            self.fc = nn.Linear(64, 10)
        def forward(self, x):
            out, _ = self.lstm(x)
            a = out[:, -1, :]
            seq, (h, c) = self.seq_first(x)
            b = seq[-1]
            turned = seq.transpose(0, 1)
            d = turned[:, -1]
            e, _ = self.flagged(x)
            return self.fc(a + b + d + e[:, -1]) + h[:, -1].sum()
    """,
        "TD109",
    )
