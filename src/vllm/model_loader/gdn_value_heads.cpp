// Reordering GDN value heads between HF's grouped and GGUF's tiled order (see
// gdn_value_heads.h for the orders and which weights they touch).
#include "vllm/model_loader/gdn_value_heads.h"

#include <cstring>
#include <vector>

#include "loader_util.h"
#include "vt/error.h"

namespace vllm {
namespace {

// perm[dst_head] = src_head for moving from `from` to `to`.
std::vector<int64_t> HeadPermutation(int64_t hk, int64_t hv, ValueHeadOrder from, ValueHeadOrder to) {
  std::vector<int64_t> perm(static_cast<size_t>(hv));
  for (int64_t g = 0; g < hv; ++g) {
    const int64_t t = TiledIndexOfGroupedHead(g, hk, hv);
    if (from == to) perm[g] = g;
    else if (to == ValueHeadOrder::kTiled) perm[t] = g;
    else perm[g] = t;
  }
  return perm;
}

// Rows [first, first + Hv * rows_per_head) of a [R, C] tensor move as head blocks;
// the other rows are copied as they are. Works for every dtype (rows are whole).
vt::Tensor PermuteRowBlocks(const vt::Tensor& w, int64_t first, int64_t rows_per_head, const std::vector<int64_t>& perm) {
  vt::Tensor src = w.Contiguous();
  vt::Tensor out = vt::Tensor::Empty(src.shape(), src.dtype(), vt::kCpu);
  const int64_t row_elems = src.ndim() == 1 ? 1 : src.numel() / src.size(0);
  const size_t row_bytes = static_cast<size_t>(vt::BytesFor(src.dtype(), row_elems));
  const auto* s = static_cast<const char*>(src.data());
  auto* d = static_cast<char*>(out.data());
  std::memcpy(d, s, static_cast<size_t>(src.nbytes()));
  const size_t block_bytes = row_bytes * static_cast<size_t>(rows_per_head);
  for (size_t h = 0; h < perm.size(); ++h) {
    std::memcpy(d + first * row_bytes + h * block_bytes, s + first * row_bytes + perm[h] * block_bytes, block_bytes);
  }
  return out;
}

// Columns of a [R, Hv * Dv] tensor move in blocks of Dv. Block dtypes whose block
// does not divide Dv are dequantized to f32 first (a partial block cannot move).
vt::Tensor PermuteColumnBlocks(const vt::Tensor& w, int64_t cols_per_head, const std::vector<int64_t>& perm) {
  vt::Tensor src = w.Contiguous();
  if (cols_per_head % vt::Info(src.dtype()).block_elems != 0) src = detail::ToF32(src, false);
  vt::Tensor out = vt::Tensor::Empty(src.shape(), src.dtype(), vt::kCpu);
  const size_t row_bytes = static_cast<size_t>(vt::BytesFor(src.dtype(), src.size(1)));
  const size_t head_bytes = static_cast<size_t>(vt::BytesFor(src.dtype(), cols_per_head));
  const auto* s = static_cast<const char*>(src.data());
  auto* d = static_cast<char*>(out.data());
  for (int64_t r = 0; r < src.size(0); ++r) {
    for (size_t h = 0; h < perm.size(); ++h) {
      std::memcpy(d + r * row_bytes + h * head_bytes, s + r * row_bytes + perm[h] * head_bytes, head_bytes);
    }
  }
  return out;
}

}  // namespace

int64_t TiledIndexOfGroupedHead(int64_t grouped, int64_t num_key_heads, int64_t num_value_heads) {
  const int64_t r = num_value_heads / num_key_heads;
  return (grouped % r) * num_key_heads + grouped / r;
}

void ReorderGdnValueHeads(WeightStore& weights, const ModelConfig& c, ValueHeadOrder from, ValueHeadOrder to) {
  // With one key head or one value head per key head both orders are the same.
  if (from == to || c.linear_num_key_heads == 1 || c.linear_num_value_heads == c.linear_num_key_heads) return;
  const std::vector<int64_t> perm = HeadPermutation(c.linear_num_key_heads, c.linear_num_value_heads, from, to);
  const int64_t dv = c.linear_value_head_dim;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.layer_types[i] != LayerType::kLinearAttention) continue;
    const std::string p = "layers." + std::to_string(i) + ".linear_attn.";
    auto rows = [&](const std::string& name, int64_t first, int64_t per_head) {
      weights.Replace(p + name, PermuteRowBlocks(weights.Get(p + name), first, per_head, perm));
    };
    rows("in_proj_qkv.weight", 2 * c.linear_key_dim(), dv);
    rows("conv1d.weight", 2 * c.linear_key_dim(), dv);
    rows("in_proj_z.weight", 0, dv);
    rows("in_proj_b.weight", 0, 1);
    rows("in_proj_a.weight", 0, 1);
    rows("A", 0, 1);
    rows("dt_bias", 0, 1);
    weights.Replace(p + "out_proj.weight", PermuteColumnBlocks(weights.Get(p + "out_proj.weight"), dv, perm));
  }
}

void ConvertGdnToGroupedOrder(LoadedModel& model) {
  if (!model.config.gdn_tiled_value_heads) return;
  ReorderGdnValueHeads(model.weights, model.config, ValueHeadOrder::kTiled, ValueHeadOrder::kGrouped);
  model.config.gdn_tiled_value_heads = false;
}

}  // namespace vllm
