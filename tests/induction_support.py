"""A two-layer model whose induction head is set by hand, to check induction scores against a known answer.

Its residual stream has four parts, each one-hot (D = K x H, K at least V and P):

    token     [0, V)              the token at this position (the token embedding)
    position  [V, V + P)          the position (the learned position embedding)
    previous  [V + P, 2V + P)     the token BEFORE this position: written by layer 0's head 0
    output    [2V + P, 3V + P)    the token the induction head copied: read by the unembedding

Layer 0, head 0 is a previous-token head: position i's query (its position) matches the key of position i - 1, and
the value it reads there is that position's token, written into "previous". Layer 1, head 0 (or the head asked for)
is the induction head: its query (the current token) matches a key's "previous" part, so it attends to the position
just after an earlier occurrence of the current token, and copies that token into "output", which the unembedding
reads as the guess.
Position 0 has no token before it (its previous-token head can only read itself), so layer 1's keys push it away.
Every other head, the MLPs and the biases are zero: a zero head attends evenly to what it may see and writes nothing.
"""
import math

import torch

from model.checkpoint import Bundle
from model.config import ModelConfig
from model.tokenizers import UNK, WordTokenizer
from model.transformer import TransformerLM

SHARP = 20.0        # the winning key's score above the others, after the 1 / sqrt(K) scaling: softmax is nearly 1
OUTPUT_SCALE = 10.0  # the copied token's logit: the guess gets nearly all the probability


def induction_model(vocab_size: int = 32, max_len: int = 32, n_heads: int = 2, head: int = 0) -> TransformerLM:
    """The hand-made model (module docstring): layer 0 head 0 a previous-token head, layer 1 head `head` an
    induction head, every other head zero."""
    V, P = vocab_size, max_len
    K = max(V, P, math.ceil((3 * V + P) / n_heads))
    cfg = ModelConfig(vocab_size=V, d_model=K * n_heads, n_heads=n_heads, n_layers=2, d_ff=4, max_len=P,
                      pos="learned", norm="none", bias=False)
    model = TransformerLM(cfg)
    tok, pos, prev, out = 0, V, V + P, 2 * V + P              # where each part of the stream starts
    s = SHARP * math.sqrt(K)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.embed.tok.weight[:, tok:tok + V] = torch.eye(V)
        model.embed.pos.weight[:, pos:pos + P] = torch.eye(P)
        # layer 0, head 0 (dimensions 0..K-1 of q, k, v): position i's query finds position i - 1's key
        a = model.blocks[0].attn
        a.W_q.weight[:P, pos:pos + P] = s * torch.eye(P)                           # q_i = s e_i
        a.W_k.weight[1:P, pos:pos + P - 1] = torch.eye(P - 1)                      # k_j = e_(j+1)
        a.W_v.weight[:V, tok:tok + V] = torch.eye(V)                               # v_j = token j
        a.W_o.weight[prev:prev + V, :V] = torch.eye(V)                             # -> "previous"
        # layer 1, head `head` (dimensions h..h+K-1): the current token finds the position whose previous token it
        # is, and copies its token
        b, h = model.blocks[1].attn, head * K
        b.W_q.weight[h:h + V, tok:tok + V] = s * torch.eye(V)                      # q_i = s token_i
        b.W_k.weight[h:h + V, prev:prev + V] = torch.eye(V)                        # k_j = previous token of j
        b.W_k.weight[h:h + V, pos] = -2.0                                          # ... position 0 has none
        b.W_v.weight[h:h + V, tok:tok + V] = torch.eye(V)                          # v_j = token j
        b.W_o.weight[out:out + V, h:h + V] = torch.eye(V)                          # -> "output"
        model.unembed.weight[:, out:out + V] = OUTPUT_SCALE * torch.eye(V)         # the copied token is the guess
    return model.eval()


def word_tokenizer(vocab_size: int) -> WordTokenizer:
    """<unk>, then w1, w2, ...: a tokenizer for a hand-made model's ids."""
    return WordTokenizer([UNK] + [f"w{i}" for i in range(1, vocab_size)])


def induction_bundle(tokenizer=None, max_len: int = 32, n_heads: int = 2, head: int = 0) -> Bundle:
    """The hand-made model as a Bundle, reading `tokenizer`'s ids (by default w1, w2, ... for 32 ids)."""
    tokenizer = tokenizer or word_tokenizer(32)
    return Bundle(induction_model(tokenizer.vocab_size, max_len, n_heads, head), tokenizer, {"made": "by hand"})
