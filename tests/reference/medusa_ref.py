"""Reference oracle of Medusa-1 heads (PyTorch, float64), independent of the C++ code
and of tools/train_medusa.py: reads medusa_lm_head.safetensors and config.json in the
Medusa project's layout (model/medusa_heads.h) and computes every head's logits.

Head i: x = h; per residual block j: x = x + silu(W_ij x + b_ij); logits = W_i,L x.
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


class MedusaRef:
    def __init__(self, model_dir, dtype=torch.float64):
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        self.num_heads = cfg["medusa_num_heads"]
        self.num_layers = cfg["medusa_num_layers"]
        arrays = safetensors_io.read(os.path.join(model_dir, "medusa_lm_head.safetensors"),
                                     as_float32=True)
        self.w = {k: torch.from_numpy(v).to(dtype) for k, (_, v) in arrays.items()}
        self.dtype = dtype

    def forward(self, hidden):
        """hidden [rows, H] -> logits [rows, num_heads, vocab]."""
        h = torch.as_tensor(hidden).to(self.dtype)
        out = []
        for i in range(self.num_heads):
            x = h
            for j in range(self.num_layers):
                p = "%d.%d.linear." % (i, j)
                x = x + torch.nn.functional.silu(x @ self.w[p + "weight"].T + self.w[p + "bias"])
            out.append(x @ self.w["%d.%d.weight" % (i, self.num_layers)].T)
        return torch.stack(out, dim=1)
