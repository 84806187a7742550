// What one forward pass receives: the batch's tokens, its attention metadata and
// the caches, all passed explicitly (never through globals).
//
// A batch is varlen: B sequences, T tokens in all; sequence b owns token rows
// query_start_loc[b] .. query_start_loc[b+1]. Single-token decodes come first
// (sequences [0, num_decodes), token rows [0, num_decodes)), then prompt chunks.
//
//   tokens:  | d0 | d1 | p2 p2 p2 p2 | p3 p3 |     query_start_loc = [0, 1, 2, 6, 8]
//   seq_lens[b] = tokens of b in the cache after this step (context + new)
//   positions[t] = seq_lens[b] - q_len_b + (t - query_start_loc[b])
//   slot_mapping[t] = block_tables[b][pos / block_size] * block_size + pos % block_size
#pragma once

#include <cstdint>
#include <vector>

#include "vt/tensor.h"

namespace vllm {

struct AttnMetadata {
  vt::Tensor positions;        // [T] i32
  vt::Tensor slot_mapping;     // [T] i32
  vt::Tensor block_tables;     // [B, max_blocks_per_seq] i32 (padded with the null block 0)
  vt::Tensor seq_lens;         // [B] i32
  vt::Tensor query_start_loc;  // [B + 1] i32
  vt::Tensor state_slot_ids;   // [B] i32, recurrent-state slots (undefined when the model has none)
  int64_t num_tokens = 0;
  int64_t num_seqs = 0;
  int64_t num_decodes = 0;  // leading sequences with exactly one new token
  int64_t max_query_len = 0;
  int64_t max_seq_len = 0;
};

struct ForwardBatch {
  vt::Tensor input_ids;  // [T] i32
  AttnMetadata attn;
  // Rows of the final hidden states that become logits: the last token of each
  // sampling sequence, and every prompt position of requests asking for prompt
  // logprobs. [N] i32.
  vt::Tensor logits_indices;
};

// One full-attention layer's paged K and V: [num_blocks, block_size, Nkv, D] views
// (possibly strided into a larger allocation).
struct LayerKvCache {
  vt::Tensor k_cache, v_cache;
};

// One Gated DeltaNet layer's recurrent state, one slot per running sequence.
struct LayerGdnState {
  vt::Tensor conv_states;  // [num_slots, conv_dim, K - 1] f32
  vt::Tensor ssm_states;   // [num_slots, Hv, Dk, Dv] f32
};

// Indexed by layer: kv[i] is defined for full-attention layers, gdn[i] for GDN layers.
struct ModelCaches {
  std::vector<LayerKvCache> kv;
  std::vector<LayerGdnState> gdn;
  // Prefix caching for hybrid models: snapshots of state slots, in the layout of
  // gdn ([num_snapshots, ...] per GDN layer); only the model runner touches them.
  std::vector<LayerGdnState> gdn_snapshots;
};

}  // namespace vllm
