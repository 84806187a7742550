// HF checkpoint folder -> GGUF, written so that llama.cpp loads the file too
// (the `vllm-cpp convert` command; llama.cpp users know it as convert_hf_to_gguf.py).
//
// Applies the converter transforms of docs/qwen35.md §5.4 to the loaded (validated,
// canonical) weights: GGUF tensor names and metadata keys; +1 baked into the
// zero-centred norms (in f32; not ssm_norm, not Qwen3); ssm_a = -exp(A_log); conv1d
// as [conv_dim, K]; value heads tiled when Hv != Hk; MoE experts as 3-D tensors;
// the shared-expert gate squeezed to {H}; no output.weight when tied. Norms, ssm_a,
// ssm_dt, conv1d and the routers stay F32, as llama.cpp keeps them; the other
// matrices take --outtype. A quantized type needs whole blocks in each row: rows
// that are not fall back (K-quants -> q8_0 -> f16) like llama.cpp's converter does.
// The tokenizer (tokenizer.json + tokenizer_config.json) becomes tokenizer.ggml.*
// and tokenizer.chat_template when the folder has one. The MTP module (mtp.*, when
// the config declares one and the files hold it) becomes block L as llama.cpp's
// converter writes it: block_count L + 1, nextn_predict_layers 1, mtp.layers.0.* as
// blk.L.*, mtp.fc / pre_fc_norm_embedding / pre_fc_norm_hidden / norm as
// blk.L.nextn.{eh_proj, enorm, hnorm, shared_head_norm} (+1 in the norms).
#pragma once

#include <string>

#include "vllm/model_loader/gguf_writer.h"

namespace vllm {

enum class GgufOutType {
  kAuto,  // the checkpoint's own float type (f32, f16 or bf16): no precision lost
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_K,  // every matrix in Q4_K (general.file_type says Q4_K_S)
  kQ5_K,
  kQ6_K,
};
// "auto", "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k".
GgufOutType ParseGgufOutType(const std::string& text);
const char* GgufOutTypeName(GgufOutType type);

struct ConvertOptions {
  GgufOutType outtype = GgufOutType::kAuto;
  bool copy_tokenizer = true;
  bool copy_mtp = true;  // false: the GGUF has no MTP block, as older converters wrote
};

// Everything ready to Write(): metadata set, tensors produced lazily (one at a time)
// from the folder's mapped files. Callers may edit the plan before writing (tests
// drop keys to build bad or old-style files).
GgufWriter PlanHfToGguf(const std::string& hf_folder, const ConvertOptions& options = {});
void ConvertHfToGguf(const std::string& hf_folder, const std::string& out_path, const ConvertOptions& options = {});

// tokenizer.json (byte-level BPE) + tokenizer_config.json -> tokenizer.ggml.* keys:
// model "gpt2", pre "qwen35" (qwen3.5 families) or "qwen2" (qwen3), tokens padded to
// `vocab_size` with [PADn] unused entries, token_type (added special tokens are
// control tokens), merges "a b", bos/eos/padding ids from tokenizer_config.json,
// add_bos_token, chat_template (tokenizer_config.json or chat_template.jinja).
// Returns false (adding nothing) when the folder has no tokenizer.json.
bool AddHfTokenizerToGguf(const std::string& hf_folder, const std::string& pre_tokenizer, int64_t vocab_size,
                          GgufMetadata& metadata);

}  // namespace vllm
