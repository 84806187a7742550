#!/usr/bin/env python3
"""Small random-weight HF transformers models and their reference outputs, for the C++
model tests (issue 4, "Reference data").

Usage (on the machine that has torch and transformers):
  python3 tools/oracle/make_models.py --out tests/data/models [--only NAME ...]
  python3 tools/oracle/make_models.py --dry-run     # specs and sizes only, no torch needed

For every model of model_specs.MODEL_SPECS it writes
  <out>/<name>/hf/                  the folder a user downloads: config.json,
                                    generation_config.json, model*.safetensors
  <out>/<name>/reference.safetensors
      logits.<i>        f32 [len_i, vocab]  logits at every position of prompt i (one
                                            forward over the whole prompt, no cache)
      decode_logits.<i> f32 [24, vocab]     the logits generate() picked each greedy
                                            token from (row 0: prefill, then decode steps)
      prompt_ids.<i>    i32 [len_i]
      greedy_ids.<i>    i32 [24]            greedy continuation, EOS disabled
  <out>/<name>/reference.json       prompt and greedy ids, checks, versions, seed, the
                                    tensor list of the HF folder and the GDN code path
  <out>/summary.json                one line per model: status, sizes, top-1 ranges

Every weight is drawn from a seeded torch.Generator (norms, A_log and dt_bias included).
Weights stored in bfloat16 are loaded back and computed in float32, so the reference
logits are exactly those of the files. Everything runs in float32 on the CPU.
"""
import argparse
import importlib.util
import json
import os
import platform
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_specs import MODEL_SPECS, NEW_TOKENS, PROMPT_LENGTHS, estimate_bytes  # noqa: E402

FAST_PATH_PACKAGES = ("fla", "causal_conv1d", "kernels")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="tests/data/models", help="folder that receives one folder per model")
    parser.add_argument("--only", nargs="*", default=None, help="model names to build (default: all)")
    parser.add_argument("--dry-run", action="store_true", help="print the specs and estimated sizes, build nothing")
    return parser.parse_args()


def select_specs(only):
    if not only:
        return MODEL_SPECS
    names = {spec["name"] for spec in MODEL_SPECS}
    unknown = sorted(set(only) - names)
    if unknown:
        sys.exit(f"unknown model names {unknown}; known: {sorted(names)}")
    return [spec for spec in MODEL_SPECS if spec["name"] in only]


def print_estimates(specs):
    total = 0
    for spec in specs:
        weights, logits = estimate_bytes(spec)
        total += weights + logits
        print(f"{spec['name']:26s} {spec['arch']:36s} {spec['storage_dtype']:8s} "
              f"weights ~{weights / 1e6:5.2f} MB  reference ~{logits / 1e6:5.2f} MB")
    print(f"total ~{total / 1e6:.2f} MB")


def fast_path_packages():
    """Which optional fast GDN packages are installed (transformers would prefer them)."""
    return {name: importlib.util.find_spec(name) is not None for name in FAST_PATH_PACKAGES}


def describe_environment(torch, transformers, installed_fast_paths):
    import transformers.utils.import_utils as import_utils

    checks = {}
    for fn in ("is_flash_linear_attention_available", "is_causal_conv1d_available", "is_kernels_available"):
        probe = getattr(import_utils, fn, None)
        try:
            checks[fn] = bool(probe()) if probe is not None else "absent in this transformers"
        except Exception as error:  # noqa: BLE001 - a probe with another signature: record it
            checks[fn] = f"{type(error).__name__}: {error}"
    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "fast_path_packages_installed": installed_fast_paths,
        "fast_path_checks": checks,
        "command_line": " ".join(["python3", "tools/oracle/make_models.py"] + sys.argv[1:]),
    }
    try:
        import safetensors

        env["safetensors"] = safetensors.__version__
    except ImportError:
        env["safetensors"] = "absent"
    return env


def main():
    args = parse_args()
    specs = select_specs(args.only)
    if args.dry_run:
        print_estimates(specs)
        return 0
    installed_fast_paths = fast_path_packages()
    import torch
    import transformers

    from oracle_torch import build_and_reference

    torch.set_grad_enabled(False)
    env = describe_environment(torch, transformers, installed_fast_paths)
    print(json.dumps(env, indent=1))
    os.makedirs(args.out, exist_ok=True)
    summary = {"environment": env, "models": []}
    for spec in specs:
        print(f"\n=== {spec['name']} ({spec['arch']}) ===", flush=True)
        try:
            summary["models"].append(build_and_reference(spec, args.out, env))
        except Exception as error:  # report and continue with the other models
            traceback.print_exc()
            summary["models"].append({"name": spec["name"], "status": f"FAILED: {type(error).__name__}: {error}"})
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    failed = [m["name"] for m in summary["models"] if m["status"] != "ok"]
    print_summary(summary)
    return 1 if failed else 0


def print_summary(summary):
    print("\n=== summary ===")
    for model in summary["models"]:
        if model["status"] != "ok":
            print(f"{model['name']:26s} {model['status']}")
            continue
        lo, hi = model["top1_prob_range"]
        print(f"{model['name']:26s} ok  hf {model['hf_bytes'] / 1e6:5.2f} MB  reference "
              f"{model['reference_bytes'] / 1e6:5.2f} MB  top-1 prob {lo:.3f}..{hi:.3f}  "
              f"greedy==argmax {model['greedy_consistent']}  min greedy margin {model['min_greedy_margin']:.2e}")


if __name__ == "__main__":
    sys.exit(main())

