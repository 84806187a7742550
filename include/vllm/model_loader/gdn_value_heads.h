// The two orders of Gated DeltaNet value heads (docs/qwen35.md §5.4 item 5).
//
// HF stores value heads grouped by key head, llama.cpp's GGUF converter tiles them:
//   grouped: [K0v0, K0v1, ..., K0v(r-1), K1v0, ...]      value head j reads key head j / r
//   tiled:   [K0v0, K1v0, ..., K(Hk-1)v0, K0v1, ...]     value head j reads key head j % Hk
// with r = Hv / Hk; grouped index k*r + i sits at tiled index i*Hk + k. The order
// touches the V rows of in_proj_qkv and the V channels of conv1d (blocks of Dv),
// all rows of in_proj_z (blocks of Dv), the rows of in_proj_b / in_proj_a and the
// elements of A / dt_bias (one per head), and the columns of out_proj (blocks of
// Dv). Row moves are exact for every dtype; out_proj's columns move exactly for
// float dtypes and block types whose block divides Dv, and are dequantized to f32
// otherwise (K-quants: 256-value blocks, Dv = 128).
#pragma once

#include <cstdint>

#include "vllm/model_loader/model_loader.h"

namespace vllm {

enum class ValueHeadOrder { kGrouped, kTiled };

// Where grouped value head `grouped` sits in the tiled order.
int64_t TiledIndexOfGroupedHead(int64_t grouped, int64_t num_key_heads, int64_t num_value_heads);

// Rewrites the GDN weights of every linear-attention layer (canonical names) from
// one order to the other; new tensors replace the old ones (mapped files untouched).
void ReorderGdnValueHeads(WeightStore& weights, const ModelConfig& config, ValueHeadOrder from, ValueHeadOrder to);

// For tests comparing a GGUF with its HF folder: puts a loaded model whose
// config.gdn_tiled_value_heads is set into HF's grouped order and clears the flag.
// Nothing at run time needs it: the GDN op reads the tiled order directly.
void ConvertGdnToGroupedOrder(LoadedModel& model);

}  // namespace vllm
