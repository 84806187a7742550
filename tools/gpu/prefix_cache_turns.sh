#!/usr/bin/env bash
# Hybrid prefix caching through the server on a GPU (issue 16's speed criteria), with
# the cache on (the default for a hybrid model) and off (--no-enable-prefix-caching):
#   - two requests sharing a 4096-token prefix (different 32-token tails), one after
#     the other: the second's TTFT against the first's;
#   - one 10-turn conversation (bench serve --num-turns: each turn resends the history
#     and the streamed answers plus 256 new tokens): TTFT per turn.
#
#   tools/gpu/prefix_cache_turns.sh VLLM_CPP MODEL.gguf OUT_DIR [DEVICE [SETTINGS]]
#
# DEVICE: cuda (default) or cpu; SETTINGS: "on off" (default), "on" or "off".
# Writes OUT_DIR/prefix_{on,off}_{first,second,turns}.json and the servers' logs, and
# prints one summary line per setting: bench serve's (client-side) TTFTs, then the
# server's own, from its log's "request ... finished ...: ..., TTFT x s" lines (in
# order: first, second, then the turns), which count from the request's arrival to
# its first token and do not depend on when the server streams the text. Called by
# bench/peer/gpu_compare.sh --prefix-cache for its first model.
set -uo pipefail
bin=$1 model=$2 out=$3 device=${4:-cuda} settings=${5:-on off}
port=8011
# random_gguf's tokenizer (the GGUF holds it padded to the vocabulary; the padding's
# ids decode to nothing, so the conversation's random text is drawn from the folder's).
tokenizer=$(cd "$(dirname "$0")/../.." && pwd)/tests/data/openai_server/tokenizer
mkdir -p "$out"

python3 - "$out" <<'EOF'
import json, random, sys
out = sys.argv[1]
rng = random.Random(7)
prefix = [rng.randrange(3, 1000) for _ in range(4096)]
for name in ("first", "second"):
    tail = [rng.randrange(3, 1000) for _ in range(32)]
    with open(f"{out}/shared_prefix_{name}.jsonl", "w") as f:
        f.write(json.dumps({"prompt_token_ids": prefix + tail, "output_len": 16}) + "\n")
EOF

wait_healthy() {  # seconds
  python3 - "$port" "$1" <<'EOF'
import sys, time, urllib.request
port, limit = sys.argv[1], float(sys.argv[2])
start = time.time()
while time.time() - start < limit:
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
            sys.exit(0)
    except Exception:
        time.sleep(0.5)
sys.exit(1)
EOF
}

for setting in $settings; do
  flags=()
  [ $setting = off ] && flags+=(--no-enable-prefix-caching)
  "$bin" serve "$model" --device "$device" --port $port --served-model-name m --max-model-len 16384 \
    --max-num-seqs 16 "${flags[@]}" >"$out/prefix_${setting}_server.log" 2>&1 &
  server=$!
  if ! wait_healthy 180; then
    echo "prefix caching $setting: the server did not come up"; tail -5 "$out/prefix_${setting}_server.log"
    kill $server 2>/dev/null; wait $server 2>/dev/null; continue
  fi
  for name in first second; do
    "$bin" bench serve --base-url http://127.0.0.1:$port --model m --dataset "$out/shared_prefix_$name.jsonl" \
      --num-prompts 1 --max-concurrency 1 --output-json "$out/prefix_${setting}_$name.json" \
      >>"$out/prefix_${setting}_bench.log" 2>&1
  done
  "$bin" bench serve --base-url http://127.0.0.1:$port --model m --num-prompts 1 --num-turns 10 \
    --random-input-len 256 --random-output-len 32 --tokenizer "$tokenizer" --max-concurrency 1 --seed 3 \
    --output-json "$out/prefix_${setting}_turns.json" >>"$out/prefix_${setting}_bench.log" 2>&1
  kill -INT $server; wait $server 2>/dev/null
  grep -m1 -i "prefix caching" "$out/prefix_${setting}_server.log" | cut -c1-200
  python3 - "$out" "$setting" <<'EOF'
import json, re, sys
out, setting = sys.argv[1], sys.argv[2]
def load(name):
    try:
        return json.load(open(f"{out}/prefix_{setting}_{name}.json"))["results"][0]
    except Exception as e:
        return None
first, second, turns = load("first"), load("second"), load("turns")
line = f"prefix caching {setting}:"
if first and second:
    a, b = first["ttft_ms"]["median"], second["ttft_ms"]["median"]
    line += f" 4096-token shared prefix TTFT first {a:.1f} ms, second {b:.1f} ms ({b / a:.3f} of the first);"
if turns and "by_turn" in turns:
    t = [x["ttft_ms"]["median"] for x in turns["by_turn"]]
    p = [x["prompt_tokens"]["median"] for x in turns["by_turn"]]
    line += " 10 turns TTFT ms " + ", ".join(f"{v:.1f}" for v in t)
    line += f" (prompt tokens {p[0]:.0f} .. {p[-1]:.0f}; last / first {t[-1] / t[0]:.2f})"
# The server's TTFTs, one per finished request in the order they were sent.
server = []
try:
    for text in open(f"{out}/prefix_{setting}_server.log", errors="replace"):
        m = re.search(r"request \S+ finished \(.*TTFT ([0-9.]+) s", text)
        if m:
            server.append(float(m.group(1)))
except OSError:
    pass
if server and not line.endswith((":", ";")):
    line += ";"
if len(server) >= 2 and server[0] > 0:
    a, b = server[0], server[1]
    line += f" server-side TTFT first {a:.3f} s, second {b:.3f} s ({b / a:.3f} of the first)"
if len(server) >= 3:
    t = server[2:12]
    line += "; 10 turns server-side TTFT s " + ",".join(f"{v:.3f}" for v in t)
    if t[0] > 0:
        line += f" (last / first {t[-1] / t[0]:.2f})"
print(line)
EOF
done
