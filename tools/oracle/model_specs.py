"""The reference models that make_models.py builds: plain dictionaries, no torch.

Each spec names the HF class, the text config (and a tiny vision config for the
VLM wrappers), the dtype the weights are stored in, the seed, and a few layout
choices (tied embeddings, sharding, MTP tensors). estimate_bytes() gives the size of
the HF folder and of the reference logits without torch, so that the sizes can be
checked on a machine without it (make_models.py --dry-run).
"""

PROMPT_LENGTHS = (1, 5, 17, 64, 100)  # 64 = one GDN chunk exactly, 100 crosses into a second
NEW_TOKENS = 24
BASE_SEED = 20251130

# The vision tower exists only so that its weights are in the folder (a text engine
# must skip model.visual.*); it is never run.
TINY_VISION = {
    "depth": 1,
    "hidden_size": 16,
    "num_heads": 2,
    "intermediate_size": 32,
    "in_channels": 3,
    "patch_size": 4,
    "temporal_patch_size": 2,
    "spatial_merge_size": 2,
    "num_position_embeddings": 16,
}


def _layer_types(num_layers, interval):
    return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(num_layers)]


def _rope(theta, factor, mrope_section):
    rope = {"rope_type": "default", "rope_theta": theta, "partial_rotary_factor": factor}
    if mrope_section is not None:
        rope["mrope_section"] = mrope_section
        rope["mrope_interleaved"] = True
    return rope


def _qwen35_text(vocab, hidden, layers, interval, heads, kv_heads, head_dim, rope, gdn, tied):
    """A Qwen3.5 text config. gdn = (Hk, Hv, Dk, Dv)."""
    hk, hv, dk, dv = gdn
    return {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "layer_types": _layer_types(layers, interval),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "linear_num_key_heads": hk,
        "linear_num_value_heads": hv,
        "linear_key_head_dim": dk,
        "linear_value_head_dim": dv,
        "linear_conv_kernel_dim": 4,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 4096,
        "rope_parameters": rope,
        "attention_bias": False,
        "tie_word_embeddings": tied,
    }


def _extras(interval, mtp_layers=None):
    """Fields real Qwen3.5 config.json files carry that HF's config class does not declare."""
    extras = {"full_attention_interval": interval, "attn_output_gate": True}
    if mtp_layers is not None:
        extras["mtp_num_hidden_layers"] = mtp_layers
    return extras


def _dense_untied():
    text = _qwen35_text(320, 64, 8, 4, 4, 2, 32, _rope(1e7, 0.25, [2, 1, 1]), (4, 4, 16, 16), False)
    text["intermediate_size"] = 64
    return {
        "name": "qwen35_dense_untied",
        "arch": "Qwen3_5ForConditionalGeneration",
        "config_class": "Qwen3_5Config",
        "family": "qwen35",
        "storage_dtype": "float32",
        "tied": False,
        "text": text,
        "text_extras": _extras(4, mtp_layers=1),
        "vision": TINY_VISION,
        "add_mtp": True,
        "max_shard_size": None,
        "seed": BASE_SEED + 1,
    }


def _tied_realshapes():
    text = _qwen35_text(256, 32, 4, 4, 4, 2, 256, _rope(1e7, 0.25, [11, 11, 10]), (16, 32, 128, 128), True)
    text["intermediate_size"] = 64
    return {
        "name": "qwen35_tied_realshapes",
        "arch": "Qwen3_5ForConditionalGeneration",
        "config_class": "Qwen3_5Config",
        "family": "qwen35",
        "storage_dtype": "bfloat16",
        "tied": True,
        "text": text,
        "text_extras": _extras(4),
        "vision": TINY_VISION,
        "add_mtp": False,
        "max_shard_size": "2MB",  # a sharded folder with model.safetensors.index.json, as big checkpoints ship
        "seed": BASE_SEED + 2,
    }


def _norope():
    # Interval 2: layer_types linear, full, linear, full. GDN with Hv = 2 Hk.
    text = _qwen35_text(256, 64, 4, 2, 4, 2, 32, _rope(1e7, 0.0, None), (2, 4, 16, 16), False)
    text["intermediate_size"] = 64
    return {
        "name": "qwen35_norope",
        "arch": "Qwen3_5ForConditionalGeneration",
        "config_class": "Qwen3_5Config",
        "family": "qwen35",
        "storage_dtype": "float32",
        "tied": False,
        "text": text,
        "text_extras": _extras(2),
        "vision": TINY_VISION,
        "add_mtp": False,
        "max_shard_size": None,
        "seed": BASE_SEED + 3,
    }


def _moe():
    text = _qwen35_text(288, 64, 4, 4, 4, 2, 32, _rope(1e7, 0.25, [2, 1, 1]), (4, 8, 16, 16), False)
    text.update(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=64)
    return {
        "name": "qwen35_moe",
        "arch": "Qwen3_5MoeForConditionalGeneration",
        "config_class": "Qwen3_5MoeConfig",
        "family": "qwen35",
        "storage_dtype": "bfloat16",  # two layouts of it are stored (hf/ per-expert, hf_fused/ 3-D)
        "tied": False,
        "text": text,
        "text_extras": _extras(4),
        "vision": TINY_VISION,
        "add_mtp": False,
        "max_shard_size": None,
        "seed": BASE_SEED + 4,
    }


def _qwen3():
    text = {
        "vocab_size": 352,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
        "attention_bias": False,
        "tie_word_embeddings": True,
    }
    return {
        "name": "qwen3",
        "arch": "Qwen3ForCausalLM",
        "config_class": "Qwen3Config",
        "family": "qwen3",
        "storage_dtype": "float32",
        "tied": True,
        "text": text,
        "text_extras": {},
        "vision": None,
        "add_mtp": False,
        "max_shard_size": None,
        "seed": BASE_SEED + 5,
    }


def _qwen35_causal_lm():
    text = _qwen35_text(256, 64, 4, 4, 4, 2, 32, _rope(1e7, 0.5, [3, 3, 2]), (2, 2, 32, 32), False)
    text["intermediate_size"] = 64
    return {
        "name": "qwen35_causallm",
        "arch": "Qwen3_5ForCausalLM",
        "config_class": "Qwen3_5TextConfig",
        "family": "qwen35",
        "storage_dtype": "float32",
        "tied": False,
        "text": text,
        "text_extras": _extras(4),
        "vision": None,
        "add_mtp": False,
        "max_shard_size": None,
        "seed": BASE_SEED + 6,
    }


MODEL_SPECS = [_dense_untied(), _tied_realshapes(), _norope(), _moe(), _qwen3(), _qwen35_causal_lm()]


def _attention_params(t):
    h, d = t["hidden_size"], t["head_dim"]
    nq, nkv = t["num_attention_heads"], t["num_key_value_heads"]
    gate = 2 if "linear_num_key_heads" in t else 1  # Qwen3.5 q_proj also emits the output gate
    return h * (gate * nq * d) + 2 * h * nkv * d + nq * d * h + 2 * d


def _gdn_params(t):
    h = t["hidden_size"]
    key_dim = t["linear_num_key_heads"] * t["linear_key_head_dim"]
    value_dim = t["linear_num_value_heads"] * t["linear_value_head_dim"]
    conv_dim = 2 * key_dim + value_dim
    hv = t["linear_num_value_heads"]
    return h * conv_dim + h * value_dim + 2 * h * hv + conv_dim * t["linear_conv_kernel_dim"] + 2 * hv + \
        t["linear_value_head_dim"] + value_dim * h


def _ffn_params(t):
    h = t["hidden_size"]
    if "num_experts" in t:
        e, i, s = t["num_experts"], t["moe_intermediate_size"], t["shared_expert_intermediate_size"]
        return e * h + e * 3 * i * h + 3 * s * h + h
    return 3 * h * t["intermediate_size"]


def _vision_params(v, out_hidden):
    c = v["hidden_size"]
    patch = v["in_channels"] * v["temporal_patch_size"] * v["patch_size"] ** 2 * c + c
    block = 4 * c * c + 4 * c + 2 * c * v["intermediate_size"] + v["intermediate_size"] + c + 4 * c
    merged = c * v["spatial_merge_size"] ** 2
    merger = 2 * c + merged * merged + merged + merged * out_hidden + out_hidden
    return patch + v["num_position_embeddings"] * c + v["depth"] * block + merger


def estimate_params(spec):
    """Parameter count of the text model (+ vision tower), without torch."""
    t = spec["text"]
    h, vocab = t["hidden_size"], t["vocab_size"]
    total = vocab * h * (1 if spec["tied"] else 2) + h
    layer_types = t.get("layer_types") or ["full_attention"] * t["num_hidden_layers"]
    for kind in layer_types:
        mixer = _attention_params(t) if kind == "full_attention" else _gdn_params(t)
        total += mixer + _ffn_params(t) + 2 * h
    if spec["vision"] is not None:
        total += _vision_params(spec["vision"], h)
    return total


def estimate_bytes(spec):
    """(weights bytes, reference logits bytes) of one model."""
    per_value = 2 if spec["storage_dtype"] == "bfloat16" else 4
    copies = 2 if "num_experts" in spec["text"] else 1  # MoE: per-expert and fused layouts
    vocab = spec["text"]["vocab_size"]
    logits_rows = sum(PROMPT_LENGTHS) + NEW_TOKENS * len(PROMPT_LENGTHS)
    return estimate_params(spec) * per_value * copies, logits_rows * vocab * 4
