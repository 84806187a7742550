#!/usr/bin/env bash
# Runs every oracle script in one go (on the machine that has torch, transformers and
# tokenizers) and packs all outputs into ONE archive, $OUT/oracle.tar.gz, laid out as
# the repository: tests/data/models/..., tests/data/tokenizer/..., tests/data/chat/...
# plus oracle_debug/ (the transformers source files the references came from: for
# reading, never committed). The log goes to $OUT/oracle.log.
#
# Usage, from the repository root:
#   OUT=/some/folder bash tools/oracle/run_all.sh
# Inputs: .oracle_inputs/tokenizers/qwen3/, the real Qwen3 tokenizer (not in the
# repository: a copy of the tokenizers folder under the tests' VT_SHARED_DATA_DIR,
# tests/CMakeLists.txt), and .oracle_inputs/templates/, a copy of
# tests/data/chat/templates (see tools/oracle/README.md).
# A failing step is reported and the others still run; the exit status is 1 if any failed.
set -euo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

OUT="${OUT:-$PWD/out/oracle}"
INPUTS="$PWD/.oracle_inputs"
STAGE="$(mktemp -d)"
FAILED=()

run_step() {
  local name="$1" limit="$2"
  shift 2
  echo
  echo "=== step $name: $* ==="
  local start=$SECONDS
  if timeout "$limit" "$@"; then
    echo "=== step $name: ok ($((SECONDS - start)) s) ==="
  else
    echo "=== step $name: FAILED with status $? ($((SECONDS - start)) s) ==="
    FAILED+=("$name")
  fi
}

print_versions() {
  date -u
  uname -a
  nproc
  python3 - <<'EOF'
import platform
import importlib
print("python", platform.python_version())
for name in ("torch", "transformers", "tokenizers", "safetensors", "jinja2", "numpy"):
    try:
        print(name, importlib.import_module(name).__version__)
    except ImportError as error:
        print(name, "MISSING", error)
EOF
}

snapshot_transformers_sources() {
  python3 - "$STAGE/oracle_debug" <<'EOF'
import os
import shutil
import sys

import transformers

root = os.path.dirname(transformers.__file__)
destination = sys.argv[1]
os.makedirs(destination, exist_ok=True)
for relative in ("models/qwen3_5/modeling_qwen3_5.py", "models/qwen3_5/configuration_qwen3_5.py",
                 "models/qwen3_5_moe/modeling_qwen3_5_moe.py", "models/qwen3_5_moe/configuration_qwen3_5_moe.py",
                 "models/qwen3/modeling_qwen3.py", "integrations/moe.py", "integrations/hub_kernels.py",
                 "modeling_rope_utils.py", "conversion_mapping.py", "cache_utils.py"):
    source = os.path.join(root, relative)
    if os.path.exists(source):
        shutil.copy(source, os.path.join(destination, relative.replace("/", "__")))
print("copied", sorted(os.listdir(destination)))
EOF
}

main() {
  print_versions
  mkdir -p "$STAGE/tests/data/models" "$STAGE/tests/data/tokenizer" "$STAGE/tests/data/chat"
  if [[ -f tools/oracle/tokenizer_reference.py ]]; then
    run_step tokenizer 120 python3 tools/oracle/tokenizer_reference.py \
      --tokenizer-dir "$INPUTS/tokenizers/qwen3" --corpus tests/data/tokenizer/corpus.jsonl \
      --out "$STAGE/tests/data/tokenizer/qwen3_expected.jsonl"
  else
    echo "tools/oracle/tokenizer_reference.py is absent: tokenizer step skipped"
  fi
  if [[ -f tools/oracle/chat_reference.py ]]; then
    run_step chat 120 python3 tools/oracle/chat_reference.py \
      --templates-dir "$INPUTS/templates" --tokenizer-dir "$INPUTS/tokenizers/qwen3" \
      --conversations tests/data/chat/conversations.jsonl --out "$STAGE/tests/data/chat/expected.jsonl"
  else
    echo "tools/oracle/chat_reference.py is absent: chat step skipped"
  fi
  run_step models 300 env -C "$STAGE" python3 "$PWD/tools/oracle/make_models.py" --out tests/data/models
  echo
  echo "=== step sources ==="
  snapshot_transformers_sources || FAILED+=("sources")
  echo
  echo "=== outputs ==="
  (cd "$STAGE" && find . -type f -printf '%8s %p\n' | sort -k2)
  du -sh "$STAGE/tests/data"/*
  mkdir -p "$OUT"
  tar -czf "$OUT/oracle.tar.gz" -C "$STAGE" .
  ls -l "$OUT/oracle.tar.gz"
  if ((${#FAILED[@]})); then
    echo "FAILED steps: ${FAILED[*]}"
    return 1
  fi
  echo "all steps ok"
}

mkdir -p "$OUT"
main 2>&1 | tee "$OUT/oracle.log"
