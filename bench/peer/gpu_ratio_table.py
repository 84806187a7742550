#!/usr/bin/env python3
"""The ratio table of gpu_compare.sh: vllm-cpp against llama.cpp on the same GGUF.

Reads, for each model name given, the files gpu_compare.sh wrote into DIR:
  NAME.latency.json      vllm-cpp bench latency (--input-len 512 --output-len 128)
  NAME.prefill2048.json  vllm-cpp bench latency (--input-len 2048 --output-len 2)
  NAME.prefill_long.json, NAME.llama-long.jsonl  the --long-prompt N prefill of both
  NAME.throughput.json   vllm-cpp bench throughput (--num-prompts 16,64,256 ...)
  NAME.llama-bench.jsonl llama-bench -o jsonl (pp512, pp2048, tg128)
  NAME.batched.jsonl     llama-batched-bench --output-format jsonl (npl 16,64,256)
and prints one markdown table: tokens/s of each engine, their ratio, and the
decode roofline fraction of vllm-cpp's batch-1 decode (weights + KV + state
bytes over the copy bandwidth measured in the same run). Missing files leave
their rows out and are listed at the end.

usage: gpu_ratio_table.py DIR NAME [NAME ...]
"""
import json
import os
import sys


def load_json(path):
    with open(path) as f:
        return json.load(f)


def load_jsonl(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def llama_bench(rows, n_prompt, n_gen):
    for r in rows:
        if int(r.get("n_prompt", -1)) == n_prompt and int(r.get("n_gen", -1)) == n_gen:
            return float(r["avg_ts"])
    return None


def batched(rows, parallel):
    for r in rows:
        if int(r.get("pl", -1)) == parallel:
            return float(r["speed"])
    return None


def fmt(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


def table(folder, names):
    out = ["| model | measure | vllm-cpp tok/s | llama.cpp tok/s | ratio | vllm-cpp of roofline |",
           "|---|---|---|---|---|---|"]
    missing = []

    def row(name, what, ours, theirs, roofline=None):
        ratio = ours / theirs if ours and theirs else None
        out.append(f"| {name} | {what} | {fmt(ours)} | {fmt(theirs)} | {fmt(ratio, 2)} | {fmt(roofline, 3)} |")

    def read(name, suffix, loader):
        path = os.path.join(folder, f"{name}.{suffix}")
        if not os.path.exists(path):
            missing.append(path)
            return None
        return loader(path)

    for name in names:
        lat = read(name, "latency.json", load_json)
        pre = read(name, "prefill2048.json", load_json)
        thr = read(name, "throughput.json", load_json)
        lb = read(name, "llama-bench.jsonl", load_jsonl) or []
        bb = read(name, "batched.jsonl", load_jsonl) or []
        if lat:
            r = lat["results"][0]
            row(name, f"prefill {lat['config']['input_len']}", r["prefill_tokens_per_s"],
                llama_bench(lb, lat["config"]["input_len"], 0))
        if pre:
            r = pre["results"][0]
            row(name, f"prefill {pre['config']['input_len']}", r["prefill_tokens_per_s"],
                llama_bench(lb, pre["config"]["input_len"], 0))
        long_ours = os.path.join(folder, f"{name}.prefill_long.json")
        if os.path.exists(long_ours):
            c = load_json(long_ours)
            n = c["config"]["input_len"]
            long_path = os.path.join(folder, f"{name}.llama-long.jsonl")
            theirs = llama_bench(load_jsonl(long_path), n, 0) if os.path.exists(long_path) else None
            row(name, f"prefill {n}", c["results"][0]["prefill_tokens_per_s"], theirs)
        if lat:
            r = lat["results"][0]
            row(name, f"batch-{r['batch_size']} decode", r["decode_tokens_per_s"],
                llama_bench(lb, 0, lat["config"]["output_len"]), r["roofline"]["fraction"])
        if thr:
            c = thr["config"]
            for r in thr["results"]:
                n = r["num_prompts"]
                row(name, f"{n} prompts x ({c['input_len']} in, {c['output_len']} out), total",
                    r["total_tokens_per_s"], batched(bb, n))
    device = None
    for name in names:
        path = os.path.join(folder, f"{name}.latency.json")
        if os.path.exists(path):
            cfg = load_json(path)["config"]
            bw = load_json(path)["memory_bandwidth"]
            device = f"{cfg['device_name']}, copy bandwidth {bw['bytes_per_s'] / 1e9:,.0f} GB/s, commit {cfg['build']['commit']}"
            break
    print("\n".join(out))
    if device:
        print(f"\n{device}")
    for path in missing:
        print(f"missing: {path}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    table(sys.argv[1], sys.argv[2:])
