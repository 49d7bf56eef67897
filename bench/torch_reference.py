"""nanoGPT's model and train.py loop in PyTorch, as the peer of spheret-lm's speed and loss.

nanoGPT's model (pre_ln, tied head, exact GELU, causal SDPA, dropout modules at p = 0, its init) and
its train.py loop (AdamW with decay on dim >= 2, betas (0.9, 0.99), global-norm clip 1.0, linear
warm-up then cosine decay, estimate_loss on random val batches at the end), fp32 on CPU, at preset
xs or s-cpu on a prepared data set (configs/demo.json's settings: batch 12, block 128, lr 1e-3 ->
1e-4, warm-up 100, decay over 300 iterations). `--compile` wraps the model in torch.compile, as
train.py does by default (compile=True). Timed as train.py times itself: dt is the wall time from
one iteration's end to the next's, so it holds the forward, the next batch's sampling (train.py's
get_batch: a fresh np.memmap of train.bin, one slice per row), the backward, the clip, the
optimizer step and the loss read-back of log_interval = 1. Prints the median tokens/s of the
iterations after --skip (the first ones hold torch.compile's compile time) and the val loss after
the last iteration (by the uncompiled module, which shares the compiled one's weights). `--peak`
prints instead the fp32 matmul rate of this torch on these threads (a 1024^3 torch.mm, median of 20).

  .venv/bin/python bench/torch_reference.py --data data/fortunes --preset xs --iters 300 --threads 1
  .venv/bin/python bench/torch_reference.py --data data/fortunes --preset xs --compile --threads 1
  .venv/bin/python bench/torch_reference.py --peak --threads 1
"""
import argparse
import math
import os
import statistics
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {"xs": (4, 4, 128), "s-cpu": (6, 6, 192)}  # n_layer, n_head, n_embd (config/scale_presets.cc)
BLOCK, BATCH = 128, 12


class Block(nn.Module):
    def __init__(self, c, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.c_attn, self.attn_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.c_fc, self.mlp_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gelu = nn.GELU()
        self.attn_drop, self.mlp_drop = nn.Dropout(0.0), nn.Dropout(0.0)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        heads = lambda y: y.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), dropout_p=0.0, is_causal=True)
        x = x + self.attn_drop(self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, c)))
        return x + self.mlp_drop(self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x)))))


class Gpt(nn.Module):
    def __init__(self, vocab, block, n_layer, n_head, c):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(block, c)
        self.drop = nn.Dropout(0.0)
        self.blocks = nn.ModuleList(Block(c, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(c)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias") and "ln" not in name:
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        pos = torch.arange(0, idx.shape[1], dtype=torch.long)
        h = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            h = block(h)
        logits = self.ln_f(h) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def learning_rate(it, lr=1e-3, min_lr=1e-4, warmup=100, decay_iters=300):
    """nanoGPT's get_lr."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay_iters:
        return min_lr
    ratio = (it - warmup) / (decay_iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def get_batch(path):
    """As train.py's get_batch: a fresh memmap each call, one int64 copy of each row's slice."""
    data = np.memmap(path, dtype=np.uint16, mode="r")
    ix = torch.randint(len(data) - BLOCK, (BATCH,))
    x = torch.stack([torch.from_numpy(data[i:i + BLOCK].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + BLOCK].astype(np.int64)) for i in ix])
    return x, y


def peak():
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(20):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    times.sort()
    print(f"fp32 matmul peak: {2 * 1024 ** 3 / times[len(times) // 2] / 1e9:.1f} GFLOP/s "
          f"(1024^3 torch.mm, {torch.get_num_threads()} threads)")


def train(args, model, optimizer, train_bin):
    """train.py's loop (one micro-step, no eval until the end); the dt of every iteration."""
    times = []
    x, y = get_batch(train_bin)
    t0 = time.time()
    for it in range(args.iters):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(it)
        loss = model(x, y)
        x, y = get_batch(train_bin)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t1 = time.time()
        times.append(t1 - t0)
        t0 = t1
        loss.item()
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data/fortunes")
    parser.add_argument("--preset", default="xs", choices=sorted(PRESETS))
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--skip", type=int, default=20, help="iterations left out of the median")
    parser.add_argument("--eval-iters", type=int, default=200)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--compile", action="store_true", help="torch.compile the model, as train.py")
    parser.add_argument("--peak", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.peak:
        return peak()
    if args.iters <= args.skip:
        parser.error(f"--iters {args.iters} leaves no iteration after --skip {args.skip}")
    torch.manual_seed(args.seed)
    model = Gpt(256, BLOCK, *PRESETS[args.preset])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-3, betas=(0.9, 0.99))
    start = time.time()
    times = train(args, torch.compile(model) if args.compile else model, optimizer,
                  os.path.join(args.data, "train.bin"))
    total = time.time() - start
    val_bin = os.path.join(args.data, "val.bin")
    with torch.no_grad():  # the uncompiled module: the same weights, without a compile for no_grad
        val_loss = sum(model(*get_batch(val_bin)).item() for _ in range(args.eval_iters))
    timed = statistics.median(times[args.skip:])
    print(f"torch reference: {BATCH * BLOCK / timed:.0f} tokens/s (median dt of iterations "
          f"{args.skip}-{args.iters - 1}, {'torch.compile' if args.compile else 'eager'}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}), val loss "
          f"{val_loss / args.eval_iters:.4f} after {args.iters} iterations; first {args.skip} "
          f"iterations {sum(times[:args.skip]):.1f} s, all {total:.1f} s")


if __name__ == "__main__":
    main()
