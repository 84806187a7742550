"""Qwen3.5's multi-token-prediction head in plain PyTorch (HF transformers has none: it
skips `mtp.*` on load). The math is docs/qwen35.md's MTP section, which the C++ engine
implements too:

  e  = RMSNorm_(1+w)(embed(t_{i+1}); pre_fc_norm_embedding)
  hh = RMSNorm_(1+w)(h_i; pre_fc_norm_hidden)        h_i: the trunk's output after its final norm
  x  = fc([e | hh])                                   embedding half first
  x  = full-attention decoder layer (gated attention, q/k norms, partial NeoX RoPE at
       position i, its own causal attention over the positions of this sequence, SwiGLU)
  logits = lm_head(norm(x))                           predicts t_{i+2}

Parameter names are the checkpoint's without the `mtp.` prefix (state_dict() + prefix =
what Qwen3.5 releases ship): fc.weight [H, 2H], pre_fc_norm_embedding.weight,
pre_fc_norm_hidden.weight, norm.weight, layers.0.{input_layernorm, post_attention_layernorm,
self_attn.{q_proj, k_proj, v_proj, o_proj, q_norm, k_norm}, mlp.{gate,up,down}_proj}.weight.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


class ZeroCenteredRMSNorm(nn.Module):
    """y = x * rsqrt(mean(x^2) + eps) * (1 + w) in float32; w starts at zero."""

    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(size))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight.float())
        return y.to(x.dtype)


def rotate_partial_neox(x, positions, rotary_dim, theta):
    """x [B, T, heads, D]: NeoX rotate-half on the first rotary_dim dims, the rest unchanged."""
    if rotary_dim == 0:
        return x
    half = rotary_dim // 2
    inv_freq = theta ** (-torch.arange(0, rotary_dim, 2, device=x.device, dtype=torch.float32) / rotary_dim)
    angle = positions.float()[:, None] * inv_freq[None, :]  # [T, half]
    cos, sin = angle.cos()[None, :, None, :], angle.sin()[None, :, None, :]
    xf = x.float()
    a, b, rest = xf[..., :half], xf[..., half:rotary_dim], xf[..., rotary_dim:]
    out = torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)
    return out.to(x.dtype)


class GatedAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, d = c["hidden_size"], c["head_dim"]
        self.nq, self.nkv, self.d = c["num_attention_heads"], c["num_key_value_heads"], d
        self.rotary_dim = int(d * c["rope_parameters"]["partial_rotary_factor"])
        self.theta = c["rope_parameters"]["rope_theta"]
        self.q_proj = nn.Linear(h, 2 * self.nq * d, bias=False)  # per head: query (D) then gate (D)
        self.k_proj = nn.Linear(h, self.nkv * d, bias=False)
        self.v_proj = nn.Linear(h, self.nkv * d, bias=False)
        self.o_proj = nn.Linear(self.nq * d, h, bias=False)
        self.q_norm = ZeroCenteredRMSNorm(d, c["rms_norm_eps"])
        self.k_norm = ZeroCenteredRMSNorm(d, c["rms_norm_eps"])

    def forward(self, x):
        b, t, _ = x.shape
        qg = self.q_proj(x).view(b, t, self.nq, 2 * self.d)
        q, gate = qg[..., :self.d], qg[..., self.d:].reshape(b, t, self.nq * self.d)
        k = self.k_proj(x).view(b, t, self.nkv, self.d)
        v = self.v_proj(x).view(b, t, self.nkv, self.d)
        positions = torch.arange(t, device=x.device)
        q = rotate_partial_neox(self.q_norm(q), positions, self.rotary_dim, self.theta)
        k = rotate_partial_neox(self.k_norm(k), positions, self.rotary_dim, self.theta)
        group = self.nq // self.nkv
        k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             is_causal=True, scale=1.0 / math.sqrt(self.d))
        out = out.transpose(1, 2).reshape(b, t, self.nq * self.d)
        return self.o_proj(out * torch.sigmoid(gate))


class SwiGlu(nn.Module):
    def __init__(self, h, i):
        super().__init__()
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MtpLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = ZeroCenteredRMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = ZeroCenteredRMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = GatedAttention(c)
        self.mlp = SwiGlu(c["hidden_size"], c["intermediate_size"])

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class MtpHead(nn.Module):
    """c: the text config as a dict. forward(hidden [B,T,H], next_ids [B,T], embed, lm_head)."""

    def __init__(self, c):
        super().__init__()
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        self.fc = nn.Linear(2 * h, h, bias=False)
        self.pre_fc_norm_embedding = ZeroCenteredRMSNorm(h, eps)
        self.pre_fc_norm_hidden = ZeroCenteredRMSNorm(h, eps)
        self.layers = nn.ModuleList([MtpLayer(c)])
        self.norm = ZeroCenteredRMSNorm(h, eps)

    def forward(self, hidden, next_ids, embed, lm_head):
        e = self.pre_fc_norm_embedding(embed(next_ids))
        x = self.fc(torch.cat([e, self.pre_fc_norm_hidden(hidden)], dim=-1))
        for layer in self.layers:
            x = layer(x)
        return lm_head(self.norm(x))
