"""The same GPT and training step in PyTorch (eager), as a baseline for spheret-lm's speed.

nanoGPT's model (pre_ln, tied head, exact GELU, causal SDPA) and its step (AdamW with decay on
dim >= 2, global-norm clip 1.0) at preset xs on the fortunes data set, fp32 on CPU. Prints the median
tokens/s of the timed steps. Run through `make bench`, beside `spheret-lm` on the same config.

  .venv/bin/python bench/torch_reference.py --data data/fortunes --steps 60 --threads 2
"""
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.c_attn, self.attn_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.c_fc, self.mlp_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        heads = lambda y: y.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab, block, n_layer, n_head, c):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(block, c)
        self.blocks = nn.ModuleList(Block(c, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(c)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias") and "ln" not in name:
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        h = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            h = block(h)
        logits = self.ln_f(h) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data/fortunes")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(1337)
    raw = open(os.path.join(args.data, "train.bin"), "rb").read()
    data = torch.frombuffer(bytearray(raw), dtype=torch.int16).to(torch.long) & 0xFFFF
    block, batch = 128, 12
    model = Gpt(256, block, 4, 4, 128)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-3, betas=(0.9, 0.99))
    times = []
    for step in range(args.steps):
        ix = torch.randint(len(data) - block, (batch,))
        x = torch.stack([data[i:i + block] for i in ix])
        y = torch.stack([data[i + 1:i + 1 + block] for i in ix])
        start = time.perf_counter()
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    timed = sorted(times[10:])
    print(f"torch reference: {batch * block / timed[len(timed) // 2]:.0f} tokens/s "
          f"(median of {len(timed)} steps, {torch.get_num_threads()} threads, torch {torch.__version__})")


if __name__ == "__main__":
    main()
