// Method `scripted`: a researcher's connection written in Python and run here with no Python.
//
// The file (options.script, its bytes) is `torch.jit.script` of an nn.Module whose
// `forward(h, f, index: int, count: int) -> Tensor` returns the next hidden state: h and f are
// (B, T, C), f = F(inner_norm(h)) (the sublayer sees the `inner_norm` knob's norm of h, LayerNorm
// by default, as pre_ln's and the sphere methods' sublayers do), `index` is the update's 1-based
// place (attention of block b is 2b - 1, its MLP 2b) and `count` the number of updates (2L).
//
// Each sublayer loads its own copy of the module, so parameters and buffers are per sublayer.
// They register on the connection as "script_<name>" ('.' of a nested name read as '_'): the
// optimizer, checkpoints and data parallelism see them as any connection's. The diagnostics are
// the generic ones (hidden norm, angle between h and h', radial share of f, token collapse); the
// sphere methods' values do not apply.
#pragma once

#include "worker/nn/connection.h"

namespace spheret::nn {

// The connection at `position` from options.script. std::invalid_argument naming the cause when
// the bytes are not a TorchScript module, its forward does not take (h, f, index, count), or two
// of its parameter names collide once '.' reads as '_'.
Connection MakeScriptedConnection(const ConnectionOptions& options,
                                  const SublayerPosition& position);

}  // namespace spheret::nn
