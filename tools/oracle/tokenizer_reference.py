#!/usr/bin/env python3
"""Reference encodings of a text corpus with HF `tokenizers` (and a cross-check with
`transformers.AutoTokenizer`), for the C++ tokenizer tests.

Usage:
  python3 tools/oracle/tokenizer_reference.py --tokenizer-dir DIR \
      --corpus tests/data/tokenizer/corpus.jsonl \
      --out tests/data/tokenizer/qwen3_expected.jsonl

DIR holds tokenizer.json (and tokenizer_config.json for the transformers check).
Each corpus line is {"text": ...}. Each output line, in corpus order, is
  {"text", "ids", "tokens", "decoded", "decoded_skip_special", "nfc"}
where ids come from Tokenizer.encode(text, add_special_tokens=False), decoded is
Tokenizer.decode(ids, skip_special_tokens=False) (and True for decoded_skip_special),
and nfc is unicodedata.normalize("NFC", text).

A second file is written next to --out (qwen35_regex_expected.jsonl unless
--qwen35-out says otherwise): the same vocabulary and merges with the pre-tokenizer
split regex replaced by the Qwen3.5 one (which adds \\p{M}, see docs/qwen35.md §6),
so that the C++ qwen35 pre-tokenizer is checked against HF too.
"""
import argparse
import json
import os
import sys
import unicodedata

from tokenizers import Tokenizer

QWEN35_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def read_corpus(path):
    texts = []
    with open(path, encoding="utf-8", newline="") as f:
        for line_no, line in enumerate(f.read().split("\n"), start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            if "text" not in record:
                sys.exit(f"{path}:{line_no}: no 'text' field")
            texts.append(record["text"])
    return texts


def with_qwen35_regex(tokenizer_json):
    """The tokenizer.json document with its Split pre-tokenizer pattern replaced."""
    doc = json.loads(json.dumps(tokenizer_json))
    replaced = 0
    for pre in doc["pre_tokenizer"].get("pretokenizers", [doc["pre_tokenizer"]]):
        if pre.get("type") == "Split":
            pre["pattern"] = {"Regex": QWEN35_SPLIT_REGEX}
            replaced += 1
    if replaced != 1:
        sys.exit(f"expected exactly one Split pre-tokenizer, found {replaced}")
    return doc


def encode_all(tokenizer, texts):
    rows = []
    for text in texts:
        enc = tokenizer.encode(text, add_special_tokens=False)
        rows.append({
            "text": text,
            "ids": enc.ids,
            "tokens": enc.tokens,
            "decoded": tokenizer.decode(enc.ids, skip_special_tokens=False),
            "decoded_skip_special": tokenizer.decode(enc.ids, skip_special_tokens=True),
            "nfc": unicodedata.normalize("NFC", text),
        })
    return rows


def check_with_transformers(tokenizer_dir, rows):
    """AutoTokenizer must give the same ids; report (never hide) any difference."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        print("transformers is not installed: cross-check skipped", file=sys.stderr)
        return True
    auto = AutoTokenizer.from_pretrained(tokenizer_dir)
    agree = True
    for i, row in enumerate(rows):
        ids = auto.encode(row["text"], add_special_tokens=False)
        if ids != row["ids"]:
            agree = False
            print(f"line {i + 1}: transformers ids differ from tokenizers ids", file=sys.stderr)
            row["transformers_ids"] = ids
    print(f"transformers.AutoTokenizer agrees on all lines: {agree}", file=sys.stderr)
    return agree


def write_rows(path, rows):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} lines to {path}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer-dir", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--qwen35-out", default=None)
    args = parser.parse_args()

    tokenizer_path = os.path.join(args.tokenizer_dir, "tokenizer.json")
    texts = read_corpus(args.corpus)

    rows = encode_all(Tokenizer.from_file(tokenizer_path), texts)
    check_with_transformers(args.tokenizer_dir, rows)
    write_rows(args.out, rows)

    with open(tokenizer_path, encoding="utf-8") as f:
        qwen35_doc = with_qwen35_regex(json.load(f))
    qwen35_rows = encode_all(Tokenizer.from_str(json.dumps(qwen35_doc)), texts)
    qwen35_out = args.qwen35_out or os.path.join(os.path.dirname(args.out), "qwen35_regex_expected.jsonl")
    write_rows(qwen35_out, qwen35_rows)


if __name__ == "__main__":
    main()
