"""Table of the runs of compare_with_llama_cpp.sh: one JSON line per engine run
(vllm_peer_bench / llama_cpp_bench.mjs). Prints per-repeat numbers, medians of
prefill and decode tokens/s per engine, the ratio vllm-cpp / llama.cpp, and the
greedy agreement of the two engines' generated ids.

Usage: python3 summarize_runs.py runs.jsonl
"""
import json
import statistics
import sys

ENGINES = ("vllm-cpp", "llama.cpp")


def agreement(a, b):
    """(position-wise equal ids, length of the common prefix, total compared)."""
    n = min(len(a), len(b))
    equal = sum(1 for x, y in zip(a, b) if x == y)
    prefix = next((i for i in range(n) if a[i] != b[i]), n)
    return equal, prefix, n


def main(path):
    runs = {e: [] for e in ENGINES}
    with open(path) as f:
        for line in f:
            if line.strip():
                run = json.loads(line)
                runs[run["engine"]].append(run)
    print()
    print(f"{'engine':<10} {'run':>3} {'load s':>7} {'prefill tok/s':>14} {'decode tok/s':>13}")
    for e in ENGINES:
        for i, r in enumerate(runs[e], 1):
            print(f"{e:<10} {i:>3} {r['load_s']:>7.2f} {r['prefill_tok_s']:>14.1f} {r['decode_tok_s']:>13.2f}")
    med = {e: {k: statistics.median(r[k] for r in runs[e]) for k in ("prefill_tok_s", "decode_tok_s", "load_s")}
           for e in ENGINES if runs[e]}
    if len(med) < 2:
        sys.exit("need runs of both engines")
    v, l = med["vllm-cpp"], med["llama.cpp"]
    first = runs["vllm-cpp"][0]
    print()
    print(f"medians over {len(runs['vllm-cpp'])}/{len(runs['llama.cpp'])} runs "
          f"(prompt {first['prompt_tokens']} tokens, {first['decode_tokens'] + 1:.0f} generated, "
          f"{first['threads']} threads):")
    print(f"{'':<16} {'vllm-cpp':>10} {'llama.cpp':>10} {'ratio':>7}")
    print(f"{'prefill tok/s':<16} {v['prefill_tok_s']:>10.1f} {l['prefill_tok_s']:>10.1f} "
          f"{v['prefill_tok_s'] / l['prefill_tok_s']:>7.2f}")
    print(f"{'decode tok/s':<16} {v['decode_tok_s']:>10.2f} {l['decode_tok_s']:>10.2f} "
          f"{v['decode_tok_s'] / l['decode_tok_s']:>7.2f}")
    print(f"{'load s':<16} {v['load_s']:>10.2f} {l['load_s']:>10.2f}")
    equal, prefix, n = agreement(runs["vllm-cpp"][0]["ids"], runs["llama.cpp"][0]["ids"])
    stable = all(r["ids"] == runs[e][0]["ids"] for e in ENGINES for r in runs[e])
    print()
    print(f"greedy agreement: {equal}/{n} ids equal position-wise, first {prefix} identical "
          f"(random weights: near-ties make divergence likely; reported, not asserted); "
          f"each engine {'repeats its own ids exactly' if stable else 'DIFFERS between its own runs'}")


if __name__ == "__main__":
    main(sys.argv[1])
