// Argument structs of the ops in ops.def: what a kernel receives.
//
// The public functions in vt/ops.h fill these after validating shapes, dtypes,
// strides, devices and aliasing, so a kernel may rely on every contract written
// here. Shapes use: T tokens, B sequences, H hidden/heads, D head dim.
// "rows" means every dim but the last; unless a field says "contiguous", rows may
// have any stride but the last dim has stride 1.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "vt/tensor.h"

namespace vt {

// dst and src have the same shape, any strides, the same device. src may be a
// block type (then src's last dim is contiguous and dst is a float type).
struct CopyArgs {
  Tensor src;
  Tensor dst;
};

struct FillArgs {
  Tensor dst;  // any dtype but a block type; any strides
  double value;
};

// Same shape; any strides; out may be the same view as a or b.
struct AddArgs {
  Tensor a, b, out;
};

// table [V, H] (contiguous rows; any dtype incl. block types), ids [T] i32 or i64
// with 0 <= id < V, out [T, H] float. An id out of range is a vt::Error naming it:
// thrown by the call on the CPU, at the device's next wait for its queue on a GPU
// (ids live in device memory there; src/vt/gpu/gpu_runtime.h).
struct GatherRowsArgs {
  Tensor table, ids, out;
};

// x [M, K] float, w [N, K] with contiguous rows (f32/f16/bf16 or a block type whose
// block divides K), out [M, N] of x's dtype, or f32 for f16/bf16 x (the f32 sums
// stored unrounded: the LM head's logits from 16-bit activations). x and out have
// unit stride in the last dim. Accumulation is f32.
struct MatMulArgs {
  Tensor x, w, out;
};

// x [rows..., D], weight [D] float, out like x (may be the same view as x).
// out = x * rsqrt(mean(x^2) + eps) * (weight + weight_offset); weight_offset is 0
// (plain) or 1 (Gemma-style zero-centred weight, y = x_hat * (1 + w)).
struct RmsNormArgs {
  Tensor x, weight, out;
  float eps;
  float weight_offset;
};

// residual [T, D] is updated in place to residual + x; out = RmsNorm(residual).
// out may be the same view as x.
struct AddRmsNormArgs {
  Tensor x, residual, weight, out;
  float eps;
  float weight_offset;
};

// x, z [rows..., D], weight [D]: out = x_hat * weight * silu(z) (plain weight).
struct GatedRmsNormArgs {
  Tensor x, z, weight, out;
  float eps;
};

// out = x * rsqrt(sum(x^2) + eps) * scale over the last dim; x [rows..., D].
struct L2NormArgs {
  Tensor x, out;
  float eps;
  float scale;
};

// gate, up, out [rows..., I].
struct SiluMulArgs {
  Tensor gate, up, out;
};

// x, out [rows..., D]; gate [rows..., D] or [rows..., 1].
struct SigmoidMulArgs {
  Tensor x, gate, out;
};

// qg [T, H * 2 * D], laid out q_h0 | g_h0 | q_h1 | g_h1 | ... (rows may be strided:
// a column view of a merged q|k|v projection); query [T, H, D] and gate [T, H * D]
// (rows may be strided).
struct AttnGateSplitArgs {
  Tensor qg, query, gate;
  int64_t head_dim;
};

// x [T, heads, D] updated in place (any strides, last dim unit stride);
// positions [T] i32/i64. Pairs (i, i + rotary_dim/2) for i < rotary_dim/2 rotate by
// angle position * theta^(-2i/rotary_dim). 0 < rotary_dim <= D, even (the public op
// returns before dispatch when rotary_dim == 0).
struct RopeNeoxArgs {
  Tensor x, positions;
  int64_t rotary_dim;
  float theta;
};

// k, v [T, Nkv, D]; k_cache, v_cache [num_blocks, block_size, Nkv, D] views with any
// strides (last dim unit stride); slot_mapping [T] i32/i64, slot = block * block_size
// + offset, negative = skip the token. Only the addressed elements are written.
struct WriteKvCacheArgs {
  Tensor k, v, k_cache, v_cache, slot_mapping;
};

// q [T, Nq, D]; caches as in WriteKvCacheArgs (already holding the new tokens);
// block_tables [B, max_blocks] i32; seq_lens [B] i32 (context incl. the new tokens);
// query_start_loc [B + 1] i32 (tokens of sequence b are rows
// query_start_loc[b] .. query_start_loc[b+1]); out [T, Nq, D].
// Token i of sequence b sits at position seq_lens[b] - q_len_b + i and attends to
// positions <= its own. Query head h reads kv head h / (Nq / Nkv).
// max_query_len / max_seq_len are host-side upper bounds used for kernel choice.
struct PagedAttentionArgs {
  Tensor q, k_cache, v_cache, block_tables, seq_lens, query_start_loc, out;
  float scale;
  int64_t max_query_len;
  int64_t max_seq_len;
};

// x [T, C] raw inputs (rows may be strided), weight [C, K] (w[c, K-1] multiplies the
// current token), conv_states [num_slots, C, K-1] f32 (oldest first),
// query_start_loc [B + 1] i32, state_slot_ids [B] i32, out [T, C].
// y[c, t] = act(sum_j w[c, j] * xin[c, t - (K-1) + j]), where inputs before the
// sequence's first token come from its conv state; afterwards the state holds the
// last K-1 raw inputs (older state shifted in when the sequence is shorter).
struct CausalConv1dArgs {
  Tensor x, weight, conv_states, query_start_loc, state_slot_ids, out;
  bool apply_silu;
};

// One token per sequence: x [B, C], state_slot_ids [B] i32, out [B, C]; the
// window is [state..., x]; the state then shifts left and appends x.
struct CausalConv1dUpdateArgs {
  Tensor x, weight, conv_states, state_slot_ids, out;
  bool apply_silu;
};

// a, b [T, Hv] float (rows may be strided); A [Hv] (= -exp(A_log)), dt_bias [Hv];
// g, beta [T, Hv] f32 outputs. softplus(x) = x for x > 20.
struct GdnGatesArgs {
  Tensor a, b, A, dt_bias, g, beta;
};

// q, k [T, Hk, Dk] (already L2-normalised; q also scaled by 1/sqrt(Dk)); v [T, Hv, Dv];
// g, beta [T, Hv] f32; states [num_slots, Hv, Dk, Dv] f32 (read as the initial
// state, written with the final state); query_start_loc [B + 1] i32;
// state_slot_ids [B] i32; out [T, Hv, Dv].
// Value head j uses key head j / (Hv / Hk) (HF's grouped order) or, when
// tiled_value_heads, key head j % Hk (the order llama.cpp's converter writes to GGUF;
// keeping it avoids permuting quantized ssm_out columns, which is not block-safe).
// Per token: S = exp(g) S; S += k (beta (v - S^T k))^T; o = S^T q.
struct GdnArgs {
  Tensor q, k, v, g, beta, states, query_start_loc, state_slot_ids, out;
  bool tiled_value_heads;
};
using GdnChunkedPrefillArgs = GdnArgs;
using GdnRecurrentArgs = GdnArgs;

// One decode step of a Gated DeltaNet layer, one token per sequence, fused (what
// CausalConv1dUpdate, L2Norm of q and k, GdnGates, GdnRecurrent and GatedRmsNorm
// compute one after another, with the same roundings to mixed's dtype between them):
//   mixed [B, C] float, C = 2 Hk Dk + Hv Dv: the raw [q | k | v] projection (rows may
//     be strided); the conv (+ SiLU) over [conv_states[slot, c], mixed[b, c]] with
//     conv_weight [C, K] float, conv_states [slots, C, K-1] f32 shifted to end on
//     mixed[b, c];
//   q, k: each key head's Dk values L2-normalised (eps 1e-6), q also scaled by 1/sqrt(Dk);
//   g = A softplus(a + dt_bias), beta = sigmoid(b): a, b [B, Hv] float (strided rows),
//     A, dt_bias [Hv];
//   the delta rule on states [slots, Hv, Dk, Dv] f32 (value head j reads key head
//     j / (Hv / Hk), or j % Hk when tiled_value_heads), giving o [B, Hv, Dv];
//   out = RmsNorm(o) * norm_weight * silu(z) over each head's Dv values, eps;
//     z [B, Hv, Dv] float (strided rows), norm_weight [Dv], out [B, Hv, Dv] mixed's dtype.
// A slot outside [0, slots) is an error on the CPU (as CausalConv1dUpdate's); the GPU,
// which cannot read the slots back without waiting, skips the row: no state change,
// out row 0 (decode graphs pad their batch with such rows).
struct GdnDecodeArgs {
  Tensor mixed, conv_weight, conv_states, a, b, A, dt_bias, states, state_slot_ids, z, norm_weight, out;
  int64_t key_heads, key_dim;
  float eps;
  bool tiled_value_heads;
};

// logits [T, E] float; topk_weights [T, k] f32; topk_ids [T, k] i32.
// p = softmax(logits); the k largest (ties: lower id first), renormalised to sum 1
// when `renormalize`.
struct MoeRouterArgs {
  Tensor logits, topk_weights, topk_ids;
  bool renormalize;
};

// x [T, H] float; w_gate, w_up [E, I, H] and w_down [E, H, I] (any dtype MatMul
// accepts; each expert's matrix has contiguous rows, the expert stride is free, so
// views into a fused gate_up tensor work); topk_weights [T, k] f32, topk_ids [T, k]
// i32; out [T, H] (overwritten). An expert id outside [0, E) is an error reported
// as GatherRows' bad ids are.
// Optional shared expert (Qwen3.5-MoE, Qwen2-MoE), all four or none: every token adds
// sigmoid(shared_gate_logits[t]) * shared_w_down(silu(shared_w_gate x) * shared_w_up x),
// shared_w_gate, shared_w_up [Is, H] and shared_w_down [H, Is] with contiguous rows
// (any MatMul weight dtype; views into a merged gate|up matrix work), shared_gate_logits
// [T, 1] float (rows may be strided: a column of the router's output). Passing it here
// rather than as separate ops lets a backend run it inside the routed experts' launches.
// Expert parallelism: w_* may hold a slice of the model's experts, global ids
// [expert_begin, expert_begin + E) of num_experts (0: E, the whole set); ids in
// [0, num_experts) outside the slice contribute nothing (another rank holds them),
// ids outside [0, num_experts) are errors. CPU only; the GPU kernels refuse a slice.
struct MoeExpertsArgs {
  Tensor x, w_gate, w_up, w_down, topk_weights, topk_ids, out;
  Tensor shared_w_gate, shared_w_up, shared_w_down, shared_gate_logits;
  int64_t expert_begin = 0;
  int64_t num_experts = 0;
};

// x [rows..., V] float; out same shape f32.
struct LogSoftmaxArgs {
  Tensor x, out;
};

// x [R, V] float; out [R] i32. allowed (optional) [R, W] i32 with 32 W >= V: bit
// (i mod 32) of word i / 32 of row r says whether index i may win (a grammar's token
// mask, structured_output); a row with no allowed index gives 0.
struct ArgmaxArgs {
  Tensor x, out;
  Tensor allowed;
};

// One row's parameters of Sample, 8 32-bit words as the kernels read them (a
// params tensor [R, 8] i32 holds a row's bytes, as SampleRowWords lays them out): the
// temperature (0: greedy), top_k (<= 0 or >= V: every index), top_p in (0, 1], min_p
// in [0, 1], the 64 bits of the request's seed and offset, the draw's position (the
// tokens the request generated so far).
struct SampleRow {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint32_t seed_lo = 0, seed_hi = 0;
  uint32_t offset_lo = 0, offset_hi = 0;
  void SetSeed(uint64_t seed) {
    seed_lo = static_cast<uint32_t>(seed);
    seed_hi = static_cast<uint32_t>(seed >> 32);
  }
  void SetOffset(int64_t offset) {
    offset_lo = static_cast<uint32_t>(offset);
    offset_hi = static_cast<uint32_t>(static_cast<uint64_t>(offset) >> 32);
  }
  // constexpr: callable from device code as well (nvcc's relaxed constexpr, hipcc).
  constexpr uint64_t Seed() const { return (static_cast<uint64_t>(seed_hi) << 32) | seed_lo; }
  constexpr int64_t Offset() const { return static_cast<int64_t>((static_cast<uint64_t>(offset_hi) << 32) | offset_lo); }
};
static_assert(sizeof(SampleRow) == 8 * sizeof(int32_t), "SampleRow is 8 words");
inline constexpr int64_t kSampleRowWords = 8;

// rows as the words of Sample's params ([rows.size(), kSampleRowWords] i32).
inline std::vector<int32_t> SampleRowWords(const std::vector<SampleRow>& rows) {
  std::vector<int32_t> words(rows.size() * kSampleRowWords);
  if (!rows.empty()) std::memcpy(words.data(), rows.data(), rows.size() * sizeof(SampleRow));
  return words;
}

// x [R, V] float logits (last dim contiguous); params [R, kSampleRowWords] i32,
// contiguous, row r the bytes of a SampleRow; out [R] i32. allowed (optional) as
// Argmax's: only the indices it sets are candidates.
// A row with temperature 0 gives Argmax's index among the candidates. Otherwise the
// candidates are filtered as the host sampler does (vllm::Sampler): min_p keeps
// x_i >= max + T log(min_p); top_k keeps values at or above the k-th largest; top_p
// keeps values at or above v, the largest value whose candidates at or above it hold
// top_p of the remaining softmax(x / T) mass (ties at a threshold all stay). Then the
// token is argmax_i (x_i / T + Gumbel(seed, offset, i)) over what is kept
// (sample_noise.h): a draw from softmax(x / T) renormalised over the kept set, the
// same on every backend. NaN values are never candidates; a row without any gives 0.
struct SampleArgs {
  Tensor x, params, out;
  Tensor allowed;
};

// vLLM's apply_penalties. x [R, V] f32 (strided rows), updated in place; token_ids
// [R, L] i32: row r's prompt tokens, then its output tokens, padded with -1 (at any
// position); output_begin [R] i32: positions >= output_begin[r] of the row are
// outputs; params [R, 3] f32: repetition_penalty (> 0; 1 is none), frequency_penalty,
// presence_penalty. For each distinct token t of row r, n its count among the row's
// outputs: x = x > 0 ? x / repetition : x * repetition, then x -= frequency * n +
// presence * (n > 0) (in double, rounded once). An id outside [-1, V) is an error
// (on a GPU reported at the device's next wait, gpu_runtime.h; the id is skipped).
struct PenaltiesArgs {
  Tensor x, token_ids, output_begin, params;
};

// vLLM's gather_logprobs for a sampled step: log_softmax(x) at the sampled token and
// at the row's k largest entries. x [R, V] float (last dim contiguous): the logits
// the step sampled from, before temperature and penalties (vLLM's raw logprobs);
// token [R] i32: each row's sampled id; allowed (optional) as Argmax's: an index it
// does not set counts as -inf, as in the host sampler's masked row (a grammar's).
// ids [R, 1 + k] i32 and values [R, 1 + k] f32, contiguous: column 0 holds the token
// and its logprob, columns 1..k the k largest logprobs, largest first, ties to the
// lower index, so the top entries equal the host's vllm::TopLogprobs. 0 <= k <=
// min(V, kMaxTopLogprobs). A token outside [0, V) is an error (on a GPU reported at
// the device's next wait, gpu_runtime.h; its column 0 then holds -1 and NaN).
inline constexpr int64_t kMaxTopLogprobs = 20;  // vLLM's default max_logprobs
struct TopLogprobsArgs {
  Tensor x, token, allowed, ids, values;
};

}  // namespace vt
