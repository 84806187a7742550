#!/usr/bin/env python3
"""Checks the reference data in tests/data/models without torch or numpy (plain Python).

Usage:
  python3 tools/oracle/check_outputs.py [tests/data/models]

For every model folder: the HF folder (and hf_fused/ when present) has config.json and its
safetensors files (index included when sharded) with readable headers; reference.safetensors holds logits.<i>
[len, vocab] f32, decode_logits.<i> [24, vocab] f32, prompt_ids.<i> and greedy_ids.<i>
i32 matching reference.json; the logits are finite; the greedy ids equal the argmax of
decode_logits. Prints sizes and the top-1 probability range. Exits 1 on any problem.
"""
import array
import json
import math
import os
import struct
import sys

DTYPE_CODES = {"F32": "f", "I32": "i"}


def read_safetensors(path):
    """(header dict, data bytes) of a safetensors file."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    return header, data


def tensor_values(header, data, name):
    entry = header[name]
    begin, end = entry["data_offsets"]
    values = array.array(DTYPE_CODES[entry["dtype"]])
    values.frombytes(data[begin:end])
    if sys.byteorder != "little":
        values.byteswap()
    return entry["shape"], values


def rows(shape, values):
    width = shape[1]
    return [values[r * width:(r + 1) * width] for r in range(shape[0])]


def top1_probability(row):
    peak = max(row)
    return 1.0 / sum(math.exp(x - peak) for x in row)


def check_hf_folder(hf_dir, problems):
    if not os.path.exists(os.path.join(hf_dir, "config.json")):
        problems.append(f"{hf_dir}: no config.json")
    files = sorted(name for name in os.listdir(hf_dir) if name.endswith(".safetensors"))
    if not files:
        problems.append(f"{hf_dir}: no safetensors file")
    if len(files) > 1 and not os.path.exists(os.path.join(hf_dir, "model.safetensors.index.json")):
        problems.append(f"{hf_dir}: several shards but no model.safetensors.index.json")
    names = []
    for name in files:
        header, _ = read_safetensors(os.path.join(hf_dir, name))
        names += [key for key in header if key != "__metadata__"]
    return names


def check_prompt(i, prompt, header, data, vocab, problems):
    """Checks one prompt's tensors; returns its top-1 probabilities."""
    shape, logits = tensor_values(header, data, f"logits.{i}")
    if shape != [len(prompt["ids"]), vocab]:
        problems.append(f"logits.{i} has shape {shape}")
    if not all(math.isfinite(x) for x in logits):
        problems.append(f"logits.{i} is not finite")
    _, ids = tensor_values(header, data, f"prompt_ids.{i}")
    _, greedy = tensor_values(header, data, f"greedy_ids.{i}")
    if list(ids) != prompt["ids"] or list(greedy) != prompt["greedy_ids"]:
        problems.append(f"prompt {i}: ids in reference.safetensors differ from reference.json")
    decode_shape, decode = tensor_values(header, data, f"decode_logits.{i}")
    argmax = [max(range(vocab), key=row.__getitem__) for row in rows(decode_shape, decode)]
    if argmax != list(greedy):
        problems.append(f"prompt {i}: greedy ids differ from argmax(decode_logits)")
    return [top1_probability(row) for row in rows(shape, logits)]


def check_model(model_dir, problems):
    with open(os.path.join(model_dir, "reference.json")) as f:
        meta = json.load(f)
    tensor_names = check_hf_folder(os.path.join(model_dir, "hf"), problems)
    fused_dir = os.path.join(model_dir, "hf_fused")
    if os.path.isdir(fused_dir):
        fused_names = check_hf_folder(fused_dir, problems)
        if not any(name.endswith("mlp.experts.gate_up_proj") for name in fused_names):
            problems.append(f"{fused_dir}: no fused experts.gate_up_proj tensor")
    header, data = read_safetensors(os.path.join(model_dir, "reference.safetensors"))
    vocab = meta["spec"]["text"]["vocab_size"]
    top1 = []
    for i, prompt in enumerate(meta["prompts"]):
        top1 += check_prompt(i, prompt, header, data, vocab, problems)
    hf_bytes = sum(os.path.getsize(os.path.join(root, n)) for folder in ("hf", "hf_fused")
                   for root, _, names in os.walk(os.path.join(model_dir, folder)) for n in names)
    ref_bytes = os.path.getsize(os.path.join(model_dir, "reference.safetensors"))
    print(f"{os.path.basename(model_dir):26s} hf {hf_bytes / 1e6:5.2f} MB ({len(tensor_names)} tensors)  "
          f"reference {ref_bytes / 1e6:5.2f} MB  top-1 prob {min(top1):.3f}..{max(top1):.3f} "
          f"(mean {sum(top1) / len(top1):.3f})  prompts {[len(p['ids']) for p in meta['prompts']]}")
    return hf_bytes + ref_bytes


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/data/models"
    problems = []
    total = 0
    for name in sorted(os.listdir(root)):
        model_dir = os.path.join(root, name)
        if os.path.isdir(model_dir):
            total += check_model(model_dir, problems)
    print(f"total {total / 1e6:.2f} MB")
    for problem in problems:
        print("PROBLEM:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
