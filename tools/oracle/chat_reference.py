#!/usr/bin/env python3
"""Reference chat-template renders with HF transformers, for the C++ chat template tests.

Usage (on the machine that has transformers):
  python3 tools/oracle/chat_reference.py \
      --templates-dir tests/data/chat/templates \
      --tokenizer-dir "$VT_SHARED_DATA_DIR/tokenizers/qwen3" \
      --conversations tests/data/chat/conversations.jsonl \
      --out tests/data/chat/expected.jsonl

--templates-dir holds qwen3.jinja and qwen3_5.jinja; --tokenizer-dir is the Qwen3 tokenizer
folder (tokenizer.json + tokenizer_config.json), used for both templates. The tokenizer is
not in the repository: VT_SHARED_DATA_DIR stands for the data folder the C++ tests read it
from (set in tests/CMakeLists.txt).

Each conversation line is
  {"name", "template": "qwen3" | "qwen3_5", "messages", "tools"?, "add_generation_prompt",
   "chat_template_kwargs"?}
Each output line, in the same order, is
  {"name", "prompt", "ids", "jinja2_prompt"}        when the template renders, or
  {"name", "error", "error_type", "jinja2_error"?}  when it raises.
"prompt" and "ids" come from tokenizer.apply_chat_template(messages, tools=...,
add_generation_prompt=..., chat_template=<the named template>, **chat_template_kwargs) with
tokenize=False and tokenize=True. "jinja2_prompt" is the same template rendered by plain
jinja2 in the environment transformers builds (see make_jinja2_environment): when it differs
from "prompt", apply_chat_template changed something outside the template engine (for
example escaping special tokens written in user content), which the C++ side must know.
A second file, <out>.versions.json, records the library versions.

--engine jinja2 skips transformers and writes only the jinja2 renders (as "prompt", no
"ids"); it runs anywhere jinja2 is installed (tests/data/chat/expected_jinja2.jsonl).

--fill-jinja-cases FILE: for the Jinja engine's own unit cases, one
{"name", "template", "context"} per line, renders each template with `context` in the same
jinja2 environment and rewrites FILE with "expected" (the output) or "error" and
"error_type" added to each line. jinja2 alone is needed (no transformers, no GPU):
  python3 tools/oracle/chat_reference.py --fill-jinja-cases tests/data/chat/jinja_cases.jsonl
"""
import argparse
import json
import os
import sys


def read_jsonl(path):
    records = []
    with open(path, encoding="utf-8", newline="") as f:
        for line_no, line in enumerate(f.read().split("\n"), start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            for key in ("template", "messages"):
                if key not in record:
                    sys.exit(f"{path}:{line_no}: no '{key}' field")
            records.append(record)
    return records


def make_jinja2_environment():
    """jinja2 configured as transformers' _compile_jinja_template configures it."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def render_jinja2(env, template, case):
    kwargs = dict(case.get("chat_template_kwargs") or {})
    return env.from_string(template).render(
        messages=case["messages"], tools=case.get("tools"), documents=None,
        add_generation_prompt=case.get("add_generation_prompt", False),
        bos_token=None, eos_token="<|im_end|>", **kwargs)


def error_fields(prefix, exc):
    return {prefix: str(exc), prefix + "_type": type(exc).__name__}


def reference_jinja2(env, template, case):
    try:
        return {"prompt": render_jinja2(env, template, case)}
    except Exception as exc:  # the template raised: that is the expected result
        return error_fields("error", exc)


def reference_transformers(tokenizer, env, template, case):
    kwargs = dict(case.get("chat_template_kwargs") or {})
    common = dict(tools=case.get("tools"), add_generation_prompt=case.get("add_generation_prompt", False),
                  chat_template=template, **kwargs)
    try:
        prompt = tokenizer.apply_chat_template(case["messages"], tokenize=False, **common)
        encoded = tokenizer.apply_chat_template(case["messages"], tokenize=True, **common)
    except Exception as exc:  # the template raised: that is the expected result
        out = error_fields("error", exc)
        try:
            render_jinja2(env, template, case)
        except Exception as jinja_exc:
            out.update(error_fields("jinja2_error", jinja_exc))
        return out
    ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded
    if ids and isinstance(ids[0], list):
        ids = ids[0]
    out = {"prompt": prompt, "ids": [int(i) for i in ids]}
    try:
        out["jinja2_prompt"] = render_jinja2(env, template, case)
    except Exception as exc:
        out.update(error_fields("jinja2_error", exc))
    return out


def fill_jinja_cases(path):
    env = make_jinja2_environment()
    with open(path, encoding="utf-8", newline="") as f:
        cases = [json.loads(line) for line in f.read().split("\n") if line.strip()]
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for case in cases:
            record = {key: case[key] for key in ("name", "template", "context")}
            try:
                record["expected"] = env.from_string(case["template"]).render(**case["context"])
            except Exception as exc:  # the case expects this error
                record.update(error_fields("error", exc))
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"filled {len(cases)} jinja cases in {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fill-jinja-cases", metavar="FILE")
    ap.add_argument("--templates-dir")
    ap.add_argument("--tokenizer-dir")
    ap.add_argument("--conversations", default="tests/data/chat/conversations.jsonl")
    ap.add_argument("--out", default="tests/data/chat/expected.jsonl")
    ap.add_argument("--engine", choices=["transformers", "jinja2"], default="transformers")
    args = ap.parse_args()
    if args.fill_jinja_cases:
        fill_jinja_cases(args.fill_jinja_cases)
        return
    if not args.templates_dir:
        sys.exit("--templates-dir is required")

    templates = {}
    for name in ("qwen3", "qwen3_5"):
        with open(os.path.join(args.templates_dir, name + ".jinja"), encoding="utf-8", newline="") as f:
            templates[name] = f.read()
    cases = read_jsonl(args.conversations)
    env = make_jinja2_environment()

    import jinja2
    versions = {"jinja2": jinja2.__version__}
    tokenizer = None
    if args.engine == "transformers":
        if not args.tokenizer_dir:
            sys.exit("--tokenizer-dir is required with --engine transformers")
        import transformers
        from transformers import AutoTokenizer
        versions["transformers"] = transformers.__version__
        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_dir)

    num_errors = 0
    with open(args.out, "w", encoding="utf-8", newline="\n") as out:
        for case in cases:
            if case["template"] not in templates:
                sys.exit(f"unknown template {case['template']!r} in case {case.get('name')!r}")
            template = templates[case["template"]]
            if tokenizer is None:
                record = reference_jinja2(env, template, case)
            else:
                record = reference_transformers(tokenizer, env, template, case)
            num_errors += "error" in record
            out.write(json.dumps({"name": case.get("name"), **record}, ensure_ascii=False) + "\n")
    with open(args.out + ".versions.json", "w", encoding="utf-8") as f:
        json.dump(versions, f, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} references ({num_errors} errors) to {args.out} with {versions}")


if __name__ == "__main__":
    main()
