#!/usr/bin/env python3
"""Trains the embedded demo model: a small Qwen3.5 (HF transformers' Qwen3_5ForCausalLM
for the trunk, tools/demo_model/mtp_head.py for the MTP head, trained jointly) on the
Brown corpus, with its own byte-level BPE tokenizer. Runs on the lent GPU machine
(torch, transformers, tokenizers); tools/demo_model/README.md gives the whole procedure.

Usage:
  python3 tools/demo_model/train.py --data .demo_data --out /tmp/demo [--smoke]

--data holds train.txt / valid.txt from prepare_corpus.py (texts separated by
<|endoftext|>). --smoke trains 20 steps of a tiny batch: a check that every stage runs.
--reference-only rewrites the references (and samples) of an existing --out/hf.

Writes into --out:
  hf/                     config.json, generation_config.json, model.safetensors (bf16,
                          trunk + mtp.* tensors), tokenizer.json, tokenizer_config.json
  reference.safetensors   the HF f32 reference of hf/ in the format of tests/data/models
                          (logits.<i>, decode_logits.<i>, prompt_ids.<i>, greedy_ids.<i>),
                          plus mtp_logits.<i> [len_i - 1, vocab] for i >= 1: the MTP
                          head's logits over prompt i (row j predicts prompt token j+2,
                          the last row the token after the prompt's next)
  reference.json          prompts, greedy ids, checks, versions
  metrics.json            perplexities (model, unigram baseline), MTP accuracy, loss history
  loss.png                train (blue) and valid (orange) loss against the step
  samples.json            greedy and sampled continuations of a few prompts
"""
import argparse
import copy
import json
import math
import os
import platform
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import loss_png  # noqa: E402
from mtp_head import MtpHead  # noqa: E402

SEED = 20261204
END_OF_TEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [END_OF_TEXT, IM_START, IM_END]  # ids 0, 1, 2
VOCAB_SIZE = 4096
# Qwen3.5's split regex (docs/qwen35.md, tokenizer): GGUF pre-tokenizer "qwen35".
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
MTP_LOSS_WEIGHT = 0.3
# The reference prompts: the first tokens of held-out texts, of the lengths of the other
# reference models (tools/oracle/model_specs.py: 64 = one GDN chunk, 100 spans two).
REFERENCE_PROMPT_LENGTHS = (1, 5, 17, 64, 100)
SAMPLE_PROMPTS = ["The history of", "In the morning", "The President said", "She looked at him and"]


def text_config(vocab):
    """Real Qwen3.5 per-layer shapes where they fit a 256-wide model: attention heads of 256
    with rotary 64 (factor 0.25, theta 1e7), GDN heads of 128, conv 4, (1+w) norms, the 3:1
    GDN:attention pattern, tied embeddings as the small Qwen3.5 releases."""
    layers = 8
    return {
        "vocab_size": vocab, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": layers,
        "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)],
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 256,
        "linear_num_key_heads": 2, "linear_num_value_heads": 2, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "hidden_act": "silu", "rms_norm_eps": 1e-6,
        "max_position_embeddings": 2048,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                            "mrope_section": [11, 11, 10], "mrope_interleaved": True},
        "attention_bias": False, "tie_word_embeddings": True,
        "bos_token_id": None, "eos_token_id": 0, "pad_token_id": 0,
    }


EXTRAS = {"full_attention_interval": 4, "attn_output_gate": True, "mtp_num_hidden_layers": 1}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--reference-only", action="store_true")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--max-minutes", type=float, default=6.0, help="stop early (recorded) past this training time")
    return p.parse_args()


def log(*args):
    print(f"[{time.strftime('%H:%M:%S')}]", *args, flush=True)


# ---------------------------------------------------------------- tokenizer and data


def read_texts(path):
    with open(path, encoding="utf-8") as f:
        return [t.strip("\n") for t in f.read().split(END_OF_TEXT) if t.strip()]


def train_tokenizer(texts):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)  # the texts hold no <|endoftext|>: it is added below
    for i, name in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(name) != i:
            raise RuntimeError(f"special token {name} got id {tok.token_to_id(name)}, wanted {i}")
    return tok


def save_tokenizer(tok, hf_dir):
    tok.save(os.path.join(hf_dir, "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": END_OF_TEXT,
        "pad_token": END_OF_TEXT, "add_bos_token": False, "add_eos_token": False, "model_max_length": 2048,
        "chat_template": CHAT_TEMPLATE,
    }
    with open(os.path.join(hf_dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=1)
        f.write("\n")


def encode_stream(tok, texts):
    """Every text's ids followed by <|endoftext|> (id 0), as one stream."""
    ids = []
    for enc in tok.encode_batch(texts):
        ids.extend(enc.ids)
        ids.append(0)
    return torch.tensor(ids, dtype=torch.long)


def unigram_perplexity(train_ids, valid_ids, vocab):
    counts = torch.bincount(train_ids, minlength=vocab).double() + 1.0  # add-one smoothing
    logp = (counts / counts.sum()).log()
    return math.exp(-float(logp[valid_ids].mean()))


# ---------------------------------------------------------------- model


def build_model(vocab):
    import transformers

    c = text_config(vocab)
    config = transformers.Qwen3_5TextConfig(**c, **EXTRAS)
    torch.manual_seed(SEED)
    model = transformers.Qwen3_5ForCausalLM(config)
    mtp = MtpHead(c)
    for module in mtp.modules():
        if isinstance(module, torch.nn.Linear):
            torch.nn.init.normal_(module.weight, std=config.initializer_range)
    return model, mtp, c


def forward_losses(model, mtp, ids):
    """ids [B, T+1]: main next-token loss over T positions, MTP loss (t_{i+2}) over T-1."""
    inputs = ids[:, :-1]
    hidden = model.model(input_ids=inputs, use_cache=False).last_hidden_state  # after the final norm
    logits = model.lm_head(hidden)
    main = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
    mtp_logits = mtp(hidden[:, :-1], inputs[:, 1:], model.model.embed_tokens, model.lm_head)
    side = F.cross_entropy(mtp_logits.float().flatten(0, 1), ids[:, 2:].flatten())
    return main, side, logits, mtp_logits


def batches_of(stream, seq, batch):
    """Consecutive non-overlapping windows of seq+1 tokens (the whole valid set, in order)."""
    n = (stream.numel() - 1) // seq
    windows = [stream[i * seq:i * seq + seq + 1] for i in range(n)]
    return [torch.stack(windows[i:i + batch]) for i in range(0, len(windows), batch)]


@torch.no_grad()
def evaluate(model, mtp, valid_batches, device, autocast):
    model.eval()
    mtp.eval()
    main_sum = side_sum = 0.0
    count = side_count = 0
    data_hits = agree_hits = 0
    for b in valid_batches:
        b = b.to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            main, side, logits, mtp_logits = forward_losses(model, mtp, b)
        tokens = b[:, 1:].numel()
        main_sum += float(main) * tokens
        side_sum += float(side) * b[:, 2:].numel()
        count += tokens
        side_count += b[:, 2:].numel()
        draft = mtp_logits.argmax(-1)  # [B, T-1], predicts position i+2
        data_hits += int((draft == b[:, 2:]).sum())
        agree_hits += int((draft == logits[:, 1:].argmax(-1)).sum())  # the trunk's own next greedy token
    model.train()
    mtp.train()
    return {"loss": main_sum / count, "mtp_loss": side_sum / side_count,
            "mtp_top1_matches_text": data_hits / side_count, "mtp_top1_matches_trunk_argmax": agree_hits / side_count}


def lr_at(step, total, peak):
    warmup = max(1, total // 30)
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(model, mtp, train_ids, valid_batches, args, device):
    params = list(model.parameters()) + list(mtp.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    gen = torch.Generator().manual_seed(SEED)
    history = {"train": [], "valid": []}
    best = {"loss": float("inf")}
    start = time.time()
    stopped_early = False
    running, running_n = 0.0, 0
    for step in range(args.steps):
        offsets = torch.randint(0, train_ids.numel() - args.seq - 1, (args.batch,), generator=gen)
        batch = torch.stack([train_ids[o:o + args.seq + 1] for o in offsets.tolist()]).to(device)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args.steps, args.lr)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            main, side, _, _ = forward_losses(model, mtp, batch)
            loss = main + MTP_LOSS_WEIGHT * side
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        running += float(main)
        running_n += 1
        last = step + 1 == args.steps
        if (step + 1) % args.eval_every == 0 or last:
            history["train"].append([step + 1, running / running_n])
            running, running_n = 0.0, 0
            metrics = evaluate(model, mtp, valid_batches, device, autocast=True)
            history["valid"].append([step + 1, metrics["loss"], metrics["mtp_loss"]])
            log(f"step {step + 1}: train {history['train'][-1][1]:.3f} valid {metrics['loss']:.3f} "
                f"(ppl {math.exp(metrics['loss']):.1f}) mtp {metrics['mtp_loss']:.3f} "
                f"mtp==trunk {metrics['mtp_top1_matches_trunk_argmax']:.3f} {time.time() - start:.0f} s")
            if metrics["loss"] < best["loss"]:
                best = {"loss": metrics["loss"], "step": step + 1,
                        "model": copy.deepcopy(model.state_dict()), "mtp": copy.deepcopy(mtp.state_dict())}
            if (time.time() - start) / 60 > args.max_minutes and not last:
                stopped_early = True
                log(f"stopping at step {step + 1}: past --max-minutes {args.max_minutes}")
                break
    return best, history, {"seconds": time.time() - start, "stopped_early": stopped_early,
                           "steps_run": history["train"][-1][0] if history["train"] else 0}


# ---------------------------------------------------------------- saving and references


def save_hf(model, mtp, tok, hf_dir):
    from safetensors.torch import load_file, save_file

    model = copy.deepcopy(model).to(torch.bfloat16).cpu()
    model.generation_config.eos_token_id = [0, 2]
    model.generation_config.pad_token_id = 0
    model.generation_config.bos_token_id = None
    model.save_pretrained(hf_dir, safe_serialization=True)
    path = os.path.join(hf_dir, "model.safetensors")
    tensors = load_file(path)
    for name, value in mtp.state_dict().items():
        tensors["mtp." + name] = value.detach().to(torch.bfloat16).cpu().contiguous()
    save_file(tensors, path, metadata={"format": "pt"})
    save_tokenizer(tok, hf_dir)
    return sorted(tensors)


def load_mtp(hf_dir, c):
    from safetensors.torch import load_file

    tensors = load_file(os.path.join(hf_dir, "model.safetensors"))
    mtp = MtpHead(c)
    mtp.load_state_dict({k[len("mtp."):]: v.float() for k, v in tensors.items() if k.startswith("mtp.")})
    return mtp.float().eval()


def reference_prompts(valid_ids_per_text):
    """Prompt i: the first REFERENCE_PROMPT_LENGTHS[i] tokens of held-out text i."""
    return [torch.tensor(ids[:n], dtype=torch.long) for ids, n in zip(valid_ids_per_text, REFERENCE_PROMPT_LENGTHS)]


@torch.no_grad()
def mtp_logits_over(model, mtp, ids):
    """The MTP logits over ids [n]: row j (0..n-2) predicts ids position j+2."""
    hidden = model.model(input_ids=ids[None], use_cache=False).last_hidden_state
    return mtp(hidden[:, :-1], ids[None, 1:], model.model.embed_tokens, model.lm_head)[0].float()


def write_references(hf_dir, out, tok, c, env, prompt_ids):
    import oracle_torch
    from safetensors.torch import save_file

    spec = {"arch": "Qwen3_5ForCausalLM", "text": c, "tied": True}
    model, loading = oracle_torch.load_reference(spec, hf_dir)
    oracle_torch.check_tying(model, True, "after loading")
    mtp = load_mtp(hf_dir, c)
    tensors, prompts = {}, []
    for i, ids in enumerate(prompt_ids):
        text = tok.decode(ids.tolist())
        r = oracle_torch.run_prompt(model, ids)
        tensors[f"logits.{i}"] = r["logits"].contiguous()
        tensors[f"decode_logits.{i}"] = r["decode_logits"].contiguous()
        tensors[f"prompt_ids.{i}"] = ids.to(torch.int32).contiguous()
        tensors[f"greedy_ids.{i}"] = r["new"].to(torch.int32).contiguous()
        if ids.numel() >= 2:
            tensors[f"mtp_logits.{i}"] = mtp_logits_over(model, mtp, ids).contiguous()
        prompts.append(dict(r["checks"], text=text, ids=ids.tolist(), greedy_ids=r["new"].tolist(),
                            greedy_text=tok.decode(r["new"].tolist())))
        log(f"reference {i}: {text!r} -> {tok.decode(r['new'].tolist())!r}")
    save_file(tensors, os.path.join(out, "reference.safetensors"),
              metadata={"format": "pt", "producer": "tools/demo_model/train.py"})
    meta = {"model": "demo", "arch": spec["arch"], "seed": SEED, "storage_dtype": "bfloat16", "tied_embeddings": True,
            "environment": env, "loading": loading, "prompts": prompts,
            "mtp_logits": "mtp_logits.<i> (prompts of 2+ tokens): MTP head over the prompt, row j predicts position j+2"}
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    return model, mtp


@torch.no_grad()
def samples(model, tok):
    import transformers

    out = []
    for i, text in enumerate(SAMPLE_PROMPTS):
        ids = torch.tensor([tok.encode(text).ids], dtype=torch.long)
        greedy = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=
                                transformers.GenerationConfig(do_sample=False, max_new_tokens=48, eos_token_id=[0, 2],
                                                              pad_token_id=0))
        torch.manual_seed(SEED + i)
        sampled = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=
                                 transformers.GenerationConfig(do_sample=True, temperature=0.8, top_p=0.95,
                                                               max_new_tokens=48, eos_token_id=[0, 2], pad_token_id=0))
        out.append({"prompt": text, "greedy": tok.decode(greedy[0, ids.shape[1]:].tolist()),
                    "sampled_t0.8_p0.95": tok.decode(sampled[0, ids.shape[1]:].tolist())})
        log(f"sample {text!r}: {out[-1]}")
    return out


@torch.no_grad()
def saved_model_perplexity(model, mtp, valid_batches, device):
    """The saved (bf16) weights computed in float32 (TF32 off): what the reference tests see."""
    metrics = evaluate(model, mtp, valid_batches, device, autocast=False)
    metrics["perplexity"] = math.exp(metrics["loss"])
    return metrics


def main():
    args = parse_args()
    if args.smoke:
        args.steps, args.batch, args.seq, args.eval_every = 20, 2, 128, 10
    import tokenizers
    import transformers

    env = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
           "tokenizers": tokenizers.__version__, "device": torch.cuda.get_device_name(0),
           "command_line": " ".join(["python3", "tools/demo_model/train.py"] + sys.argv[1:])}
    log(json.dumps(env))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    hf_dir = os.path.join(args.out, "hf")
    os.makedirs(hf_dir, exist_ok=True)
    valid_texts = read_texts(os.path.join(args.data, "valid.txt"))
    if args.reference_only:  # needs valid.txt alone
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
        c = text_config(tok.get_vocab_size())
        prompts = reference_prompts([e.ids for e in tok.encode_batch(valid_texts)])
        ref_model, _ = write_references(hf_dir, args.out, tok, c, env, prompts)
        with open(os.path.join(args.out, "samples.json"), "w") as f:
            json.dump(samples(ref_model, tok), f, indent=1)
            f.write("\n")
        log("done (references only)")
        return
    train_texts = read_texts(os.path.join(args.data, "train.txt"))
    tok = train_tokenizer(train_texts)
    train_ids, valid_ids = encode_stream(tok, train_texts), encode_stream(tok, valid_texts)
    vocab = tok.get_vocab_size()
    log(f"tokenizer: vocab {vocab}; tokens: train {train_ids.numel()}, valid {valid_ids.numel()}")
    if args.smoke:
        valid_ids = valid_ids[:4 * args.seq + 1]
    valid_batches = batches_of(valid_ids, args.seq, 8)
    device = "cuda"
    model, mtp, c = build_model(vocab)
    n_trunk = sum(p.numel() for p in model.parameters())
    n_mtp = sum(p.numel() for p in mtp.parameters())
    log(f"parameters: trunk {n_trunk}, mtp {n_mtp}")
    model.to(device).train()
    mtp.to(device).train()
    best, history, run = train(model, mtp, train_ids, valid_batches, args, device)
    model.load_state_dict(best["model"])
    mtp.load_state_dict(best["mtp"])
    names = save_hf(model, mtp, tok, hf_dir)
    log(f"saved {len(names)} tensors (best step {best['step']}, valid loss {best['loss']:.4f})")
    prompts = reference_prompts([e.ids for e in tok.encode_batch(valid_texts)])
    ref_model, ref_mtp = write_references(hf_dir, args.out, tok, c, env, prompts)
    saved = saved_model_perplexity(copy.deepcopy(ref_model).to(device), copy.deepcopy(ref_mtp).to(device),
                                   valid_batches, device)
    metrics = {
        "parameters": {"trunk": n_trunk, "mtp": n_mtp}, "vocab": vocab,
        "tokens": {"train": int(train_ids.numel()), "valid": int(valid_ids.numel())},
        "args": vars(args), "run": run, "best_step": best["step"], "best_valid_loss_bf16_autocast": best["loss"],
        "saved_model_f32": saved, "unigram_perplexity": unigram_perplexity(train_ids, valid_ids, vocab),
        "mtp_loss_weight": MTP_LOSS_WEIGHT, "history": history, "environment": env,
    }
    log(f"valid perplexity (saved bf16 weights, f32): {saved['perplexity']:.2f}; unigram "
        f"{metrics['unigram_perplexity']:.2f}; MTP top-1 = trunk argmax {saved['mtp_top1_matches_trunk_argmax']:.3f}")
    with open(os.path.join(args.out, "samples.json"), "w") as f:
        json.dump(samples(ref_model, tok), f, indent=1)
        f.write("\n")
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
        f.write("\n")
    loss_png.plot(os.path.join(args.out, "loss.png"),
                  [([(s, l) for s, l in history["train"]], (31, 119, 180)),
                   ([(s, l) for s, l, _ in history["valid"]], (255, 127, 14))])
    log("done")


if __name__ == "__main__":
    main()
