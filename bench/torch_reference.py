"""The same GPT and training run in PyTorch (eager), as the baseline for spheret-lm's speed and loss.

nanoGPT's model (pre_ln, tied head, exact GELU, causal SDPA, its init) and its train.py loop (AdamW
with decay on dim >= 2, betas (0.9, 0.99), global-norm clip 1.0, linear warm-up then cosine decay,
estimate_loss on random val batches at the end), fp32 on CPU, at preset xs or s-cpu on a prepared
data set (configs/demo.json's settings: batch 12, block 128, lr 1e-3 -> 1e-4, warm-up 100, decay
over 300 iterations). Prints the median tokens/s of the steps after the 10th (forward, backward,
clip, optimizer; not the batch sampling) and the val loss after the last iteration. `--peak` prints
instead the fp32 matmul rate of this torch on these threads (a 1024^3 torch.mm, median of 20).

  .venv/bin/python bench/torch_reference.py --data data/fortunes --preset xs --iters 300 --threads 2
  .venv/bin/python bench/torch_reference.py --peak --threads 1
"""
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {"xs": (4, 4, 128), "s-cpu": (6, 6, 192)}  # n_layer, n_head, n_embd (config/scale_presets.cc)


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


def learning_rate(it, lr=1e-3, min_lr=1e-4, warmup=100, decay_iters=300):
    """nanoGPT's get_lr."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay_iters:
        return min_lr
    ratio = (it - warmup) / (decay_iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def tokens(path):
    raw = open(path, "rb").read()
    return torch.frombuffer(bytearray(raw), dtype=torch.uint16).to(torch.long)


def batch(data, block, size):
    ix = torch.randint(len(data) - block, (size,))
    x = torch.stack([data[i:i + block] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block] for i in ix])
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data/fortunes")
    parser.add_argument("--preset", default="xs", choices=sorted(PRESETS))
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--eval-iters", type=int, default=200)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--peak", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.peak:
        return peak()
    torch.manual_seed(args.seed)
    train, val = tokens(os.path.join(args.data, "train.bin")), tokens(os.path.join(args.data, "val.bin"))
    block, size = 128, 12
    model = Gpt(256, block, *PRESETS[args.preset])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-3, betas=(0.9, 0.99))
    times = []
    for it in range(args.iters):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(it)
        x, y = batch(train, block, size)
        start = time.perf_counter()
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    with torch.no_grad():
        val_loss = sum(model(*batch(val, block, size)).item() for _ in range(args.eval_iters))
    timed = sorted(times[10:])
    print(f"torch reference: {size * block / timed[len(timed) // 2]:.0f} tokens/s "
          f"(median of {len(timed)} steps, {torch.get_num_threads()} threads, torch {torch.__version__}), "
          f"val loss {val_loss / args.eval_iters:.4f} after {args.iters} iterations")


if __name__ == "__main__":
    main()
