"""Deep connections written in Python, for `method: scripted` (docs/connections.md).

A connection is an nn.Module whose forward(h, f, index, count) returns the next hidden state:
h and f are (B, T, C), f is the sublayer's output on the `inner_norm` of h (LayerNorm unless the
sweep says otherwise), `index` the update's 1-based place (block b's attention is 2b - 1, its MLP
2b) and `count` the number of updates (2 x n_layer). spheret-lm loads the TorchScript of one
module per sublayer, so each sublayer trains its own copy of the parameters.

  python examples/connections/connections.py OUT_DIR     # writes OUT_DIR/<name>.pt for each

The files are what a sweep names (`connection: rezero.pt`, relative to the sweep file);
examples/connections/sweep.yaml runs them against the built-in baselines.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F


class PreLnResidual(torch.nn.Module):
    """pre_ln's residual add, h + F(LN(h)): the same losses as `method: pre_ln`."""

    def forward(self, h: torch.Tensor, f: torch.Tensor, index: int, count: int) -> torch.Tensor:
        return h + f


class ReZero(torch.nn.Module):
    """ReZero (Bachlechner et al. 2020): h + alpha F, alpha a learned scalar starting at 0."""

    def __init__(self):
        super().__init__()
        self.alpha = torch.nn.Parameter(torch.zeros(()))

    def forward(self, h: torch.Tensor, f: torch.Tensor, index: int, count: int) -> torch.Tensor:
        return h + self.alpha * f


class DytResidual(torch.nn.Module):
    """A DyT-style squashed residual: h + g * tanh(a F) + b, per-channel g and b, scalar a."""

    def __init__(self, n_embd: int = 128, alpha_init: float = 0.5):
        super().__init__()
        self.a = torch.nn.Parameter(torch.full((), alpha_init))
        self.g = torch.nn.Parameter(torch.ones(n_embd))
        self.b = torch.nn.Parameter(torch.zeros(n_embd))

    def forward(self, h: torch.Tensor, f: torch.Tensor, index: int, count: int) -> torch.Tensor:
        return h + self.g * torch.tanh(self.a * f) + self.b


def softplus_init_at_most(init: float, bound: float) -> torch.Tensor:
    """The largest float32 at or below `init` whose softplus is at most `bound`."""
    x = torch.tensor(init, dtype=torch.float32)
    while F.softplus(x).item() > bound:
        x = torch.nextafter(x, torch.tensor(-math.inf))
    return x


class GeoNorm(torch.nn.Module):
    """GeoNorm (docs/methods.md §2) as literal formulas: the exponential map of the tangent part
    z of f at h, angle theta = alpha_l ||z|| / ||h||, capped at pi/4, alpha_l = clamp(softplus(a),
    max=1) / sqrt(l) over the block index l. The built-in `geonorm` at `fused: false`."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(softplus_init_at_most(math.log(math.e - 1.0), 1.0))
        self.angle_max = math.pi / 4

    def forward(self, h: torch.Tensor, f: torch.Tensor, index: int, count: int) -> torch.Tensor:
        block = (index + 1) // 2
        alpha = torch.clamp_max(F.softplus(self.a), 1.0) * (1.0 / math.sqrt(block))
        nh2 = h.square().sum(-1, keepdim=True).clamp_min(1e-12)
        nh = nh2.sqrt()
        z = f - ((h * f).sum(-1, keepdim=True) / nh2) * h
        nz = z.square().sum(-1, keepdim=True).clamp_min(1e-12).sqrt()
        theta = (alpha * nz / nh).clamp_max(self.angle_max)
        return torch.cos(theta) * h + nh * torch.sin(theta) * z / nz


def main(out_dir: str, n_embd: int = 128) -> None:
    os.makedirs(out_dir, exist_ok=True)
    modules = {"pre_ln_residual": PreLnResidual(), "rezero": ReZero(),
               "dyt_residual": DytResidual(n_embd), "geonorm": GeoNorm()}
    for name, module in modules.items():
        path = os.path.join(out_dir, name + ".pt")
        torch.jit.script(module).save(path)
        print(path)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: connections.py OUT_DIR [N_EMBD]")
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
