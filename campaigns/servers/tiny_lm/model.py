"""The model side of the tiny server: a hashed-word tokenizer and a small pre-LN decoder with a
slot-based KV cache (random weights from a fixed seed, so greedy output is reproducible)."""

from __future__ import annotations

import argparse
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

EOS = 0


# --- tokenizer: whitespace words hashed into the vocabulary ---------------------------------
class Tokenizer:
    _C, _V = "bcdfghjklmnprstvz", "aeiou"

    def __init__(self, vocab: int):
        self.vocab = vocab
        self.words = ["</s>"] + [self._word(i) for i in range(1, vocab)]

    def _word(self, i: int) -> str:
        out = ""
        while True:
            out += self._C[i % len(self._C)] + self._V[(i // len(self._C)) % len(self._V)]
            i //= len(self._C) * len(self._V)
            if i == 0:
                return out

    def encode(self, text: str) -> list[int]:
        ids = [1 + zlib.crc32(w.encode()) % (self.vocab - 1) for w in text.split()]
        return ids or [1]

    def piece(self, tok: int) -> str:
        return "" if tok == EOS else " " + self.words[tok]


# --- model ----------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)


class TinyLM(nn.Module):
    """Pre-LN decoder. K/V live in ``[slots, heads, max_seq, head_dim]`` tensors per layer."""

    def __init__(self, a: argparse.Namespace, dtype: torch.dtype):
        super().__init__()
        torch.manual_seed(a.seed)
        self.h, self.hd, self.max_seq = a.heads, a.dim // a.heads, a.max_seq_len
        self.emb, self.pos = nn.Embedding(a.vocab, a.dim), nn.Embedding(a.max_seq_len, a.dim)
        self.blocks = nn.ModuleList(Block(a.dim) for _ in range(a.layers))
        self.ln_f, self.head = nn.LayerNorm(a.dim), nn.Linear(a.dim, a.vocab, bias=False)
        nn.init.normal_(self.head.weight, std=0.25)  # peaked next-token distributions, like a trained LM
        self.to(dtype).eval()
        shape = (a.max_batch_size, self.h, a.max_seq_len, self.hd)
        self.k = [torch.zeros(shape, dtype=dtype) for _ in self.blocks]
        self.v = [torch.zeros(shape, dtype=dtype) for _ in self.blocks]

    def _mlp(self, blk: Block, x: torch.Tensor) -> torch.Tensor:
        return x + blk.fc2(F.gelu(blk.fc1(blk.ln2(x))))

    @torch.inference_mode()
    def prefill(self, slot: int, ids: list[int], start: int) -> torch.Tensor:
        n = len(ids)
        x = self.emb(torch.tensor(ids)) + self.pos(torch.arange(start, start + n))
        x = x[None]
        total = start + n
        mask = torch.arange(total)[None, :] <= (start + torch.arange(n))[:, None]
        for i, blk in enumerate(self.blocks):
            q, k, v = blk.qkv(blk.ln1(x)).view(1, n, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
            self.k[i][slot, :, start:total] = k[0]
            self.v[i][slot, :, start:total] = v[0]
            keys, vals = self.k[i][slot:slot + 1, :, :total], self.v[i][slot:slot + 1, :, :total]
            a = F.scaled_dot_product_attention(q, keys, vals, attn_mask=mask)
            x = x + blk.proj(a.transpose(1, 2).reshape(1, n, -1))
            x = self._mlp(blk, x)
        return self.head(self.ln_f(x[:, -1])).float()[0]

    def decode(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """One token for each of the first ``len(tokens)`` slots (free slots carry a dummy)."""
        with torch.inference_mode():
            return self._decode(tokens, positions)

    def _decode(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        b = tokens.shape[0]
        x = (self.emb(tokens) + self.pos(positions))[:, None]
        length = int(positions.max()) + 1
        mask = (torch.arange(length)[None, :] <= positions[:, None])[:, None, None, :]
        rows = torch.arange(b)
        for i, blk in enumerate(self.blocks):
            q, k, v = blk.qkv(blk.ln1(x)).view(b, 1, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
            self.k[i][rows, :, positions] = k[:, :, 0]
            self.v[i][rows, :, positions] = v[:, :, 0]
            a = F.scaled_dot_product_attention(q, self.k[i][:b, :, :length], self.v[i][:b, :, :length],
                                               attn_mask=mask)
            x = x + blk.proj(a.transpose(1, 2).reshape(b, 1, -1))
            x = self._mlp(blk, x)
        return self.head(self.ln_f(x[:, 0])).float()
