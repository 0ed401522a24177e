"""The PyTorch side of examples/char_lstm: the same model, data streams and training step as minidl's char_lstm,
shared by check_against_pytorch.py and train_reference.py.

- The model: nn.Embedding(vocab, embed) -> nn.LSTM(embed, hidden, layers), time-major -> nn.Linear(hidden,
  vocab), named as PyTorch's word_language_model RNNModel (encoder, rnn, decoder) and initialised as its
  init_weights (U(-0.1, 0.1) embedding and decoder weight, zero decoder bias, nn.LSTM's own initialisation).
- The data: the sorted distinct characters of the text are the vocabulary, the first 90% trains, the last 10%
  validates; each split is cut into batch_size contiguous streams (word_language_model's batchify) and batch i is
  characters [i T, (i + 1) T) of every stream, (T, B), with the targets one character further on; only full
  batches.
- The step: the state of the previous batch, detached (zeros at an epoch's start), cross entropy per character,
  clip_grad_norm_, Adam.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "gpt", "data", "input.txt")


class CharLSTM(nn.Module):
    def __init__(self, vocab_size, embed, hidden, layers):
        super().__init__()
        self.encoder = nn.Embedding(vocab_size, embed)
        self.rnn = nn.LSTM(embed, hidden, layers)
        self.decoder = nn.Linear(hidden, vocab_size)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, tokens, state=None):
        out, state = self.rnn(self.encoder(tokens), state)
        return self.decoder(out), state


def loss_of(logits, targets):
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def read_splits(path):
    """(vocabulary, train tokens, val tokens) of a UTF-8 text, as examples/common/text_tokens.cpp."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"{os.path.basename(sys.argv[0])}: cannot read {path}: {e.strerror}")
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    tokens = torch.tensor([index[c] for c in text], dtype=torch.int64)
    n_train = len(text) * 9 // 10
    return chars, tokens[:n_train], tokens[n_train:]


class Streams:
    """The batches of one split: batch_size contiguous streams, full batches of seq_len."""

    def __init__(self, tokens, batch_size, seq_len, what):
        self.length = tokens.numel() // batch_size
        self.seq_len = seq_len
        self.batches = (self.length - 1) // seq_len
        if self.batches < 1:
            sys.exit(f"{what}: {tokens.numel()} characters in {batch_size} streams are too few for one batch of "
                     f"{seq_len}")
        self.data = tokens[:batch_size * self.length].view(batch_size, self.length).t().contiguous()  # (L, B)

    def batch(self, i):
        t = self.seq_len
        return self.data[i * t:(i + 1) * t], self.data[i * t + 1:(i + 1) * t + 1]


def detached(state):
    return tuple(s.detach() for s in state)


def zero_state(model, batch_size, device):
    shape = (model.rnn.num_layers, batch_size, model.rnn.hidden_size)
    return torch.zeros(shape, device=device), torch.zeros(shape, device=device)


def train_step(model, optimizer, params, x, y, state, grad_clip):
    """One truncated-BPTT step from `state`; returns (loss tensor, the detached state for the next batch)."""
    optimizer.zero_grad(set_to_none=True)
    logits, state = model(x, state)
    loss = loss_of(logits, y)
    loss.backward()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(params, grad_clip)
    optimizer.step()
    return loss.detach(), detached(state)


@torch.no_grad()
def evaluate(model, streams, batches, device):
    """Validation loss per character over the first `batches` batches (all when 0), the state carried from
    zeros."""
    n = min(batches, streams.batches) if batches > 0 else streams.batches
    model.eval()
    state, total = None, 0.0
    for i in range(n):
        x, y = streams.batch(i)
        logits, state = model(x.to(device), state)
        total += loss_of(logits, y.to(device)).item()
    model.train()
    return total / n
