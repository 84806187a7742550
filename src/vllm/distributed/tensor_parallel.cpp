#include "vllm/distributed/tensor_parallel.h"

#include <string>
#include <vector>

#include "vllm/model_loader/weight_names.h"
#include "vt/error.h"

namespace vllm {
namespace {

struct Run {
  int64_t start = 0;
  int64_t length = 0;
};

std::vector<Run> Scaled(const std::vector<Run>& runs, int64_t unit, int64_t offset = 0) {
  std::vector<Run> out;
  for (const Run& r : runs) out.push_back({offset + r.start * unit, r.length * unit});
  return out;
}

std::vector<Run> Concat(std::vector<Run> a, const std::vector<Run>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The runs of `w` along `dim`, in order. One run along dim 0 is a view (rows of whole
// blocks are byte ranges); anything else is a copy.
vt::Tensor TakeRuns(const std::string& name, const vt::Tensor& w, int dim, const std::vector<Run>& runs) {
  try {
    if (runs.size() == 1 && dim == 0) return w.Slice(0, runs[0].start, runs[0].start + runs[0].length);
    vt::Shape shape = w.shape();
    shape[dim] = 0;
    for (const Run& r : runs) shape[dim] += r.length;
    vt::Tensor out = vt::Tensor::Empty(shape, w.dtype(), w.device());
    int64_t at = 0;
    for (const Run& r : runs) {
      out.Slice(dim, at, at + r.length).CopyFrom(w.Slice(dim, r.start, r.start + r.length));
      at += r.length;
    }
    return out;
  } catch (const vt::Error& e) {
    throw vt::Error("tensor parallel: cannot split weight '" + name + "' " + w.Describe() + " along dim " +
                    std::to_string(dim) + ": " + e.what());
  }
}

void RequireDivisible(const char* field, int64_t value, int world_size) {
  if (value % world_size != 0) {
    throw vt::Error("tensor parallel: the model's " + std::string(field) + " (" + std::to_string(value) +
                    ") is not divisible by --tensor-parallel-size " + std::to_string(world_size));
  }
}

// The KV heads of a rank: its share, or the one head it replicates when the group is
// larger than the KV heads (vLLM's rule).
Run KvHeads(int64_t num_kv_heads, int rank, int world_size) {
  if (num_kv_heads % world_size == 0) {
    const int64_t local = num_kv_heads / world_size;
    return {rank * local, local};
  }
  if (world_size % num_kv_heads == 0) return {rank / (world_size / num_kv_heads), 1};
  throw vt::Error("tensor parallel: the model's num_key_value_heads (" + std::to_string(num_kv_heads) +
                  ") and --tensor-parallel-size " + std::to_string(world_size) +
                  " must divide one another");
}

// A rank's GDN value heads (see the header): one run in grouped order, Hv/Hk runs of
// Hk/world in tiled order.
std::vector<Run> ValueHeads(const ModelConfig& c, int rank, int world_size) {
  const int64_t Hk = c.linear_num_key_heads, Hv = c.linear_num_value_heads;
  if (!c.gdn_tiled_value_heads) return {{rank * (Hv / world_size), Hv / world_size}};
  std::vector<Run> runs;
  const int64_t local_k = Hk / world_size;
  for (int64_t group = 0; group < Hv / Hk; ++group) runs.push_back({group * Hk + rank * local_k, local_k});
  return runs;
}

class Sharder {
 public:
  // `local` is the rank's ShardModelConfig (its expert slice with expert parallelism).
  Sharder(const ModelConfig& c, const ModelConfig& local, const WeightStore& in, int rank, int world)
      : c_(c), local_(local), in_(in), rank_(rank), world_(world) {}

  void Split(const std::string& name, int dim, const std::vector<Run>& runs) {
    out_.Add(name, TakeRuns(name, in_.Get(name), dim, runs));
  }
  void Share(const std::string& name, int dim, int64_t size) {  // this rank's equal share of `size`
    Split(name, dim, {{rank_ * (size / world_), size / world_}});
  }
  void Keep(const std::string& name) { out_.Add(name, in_.Get(name)); }

  void Attention(const std::string& p) {
    const int64_t D = c_.head_dim, Nq = c_.num_attention_heads / world_;
    const int64_t q_rows_per_head = D * (c_.attn_output_gate ? 2 : 1);
    const Run kv = KvHeads(c_.num_key_value_heads, rank_, world_);
    Split(p + "self_attn.q_proj.weight", 0, {{rank_ * Nq * q_rows_per_head, Nq * q_rows_per_head}});
    Split(p + "self_attn.k_proj.weight", 0, Scaled({kv}, D));
    Split(p + "self_attn.v_proj.weight", 0, Scaled({kv}, D));
    Split(p + "self_attn.o_proj.weight", 1, {{rank_ * Nq * D, Nq * D}});
    Keep(p + "self_attn.q_norm.weight");
    Keep(p + "self_attn.k_norm.weight");
  }

  void LinearAttention(const std::string& p) {
    const std::string a = p + "linear_attn.";
    const int64_t Dk = c_.linear_key_head_dim, Dv = c_.linear_value_head_dim;
    const int64_t local_k = c_.linear_num_key_heads / world_;
    const std::vector<Run> values = ValueHeads(c_, rank_, world_);
    // [q | k | v] rows: the rank's key heads of q and of k, then its value heads.
    const std::vector<Run> qkv =
        Concat(Concat({{rank_ * local_k * Dk, local_k * Dk}}, {{c_.linear_key_dim() + rank_ * local_k * Dk, local_k * Dk}}),
               Scaled(values, Dv, 2 * c_.linear_key_dim()));
    Split(a + "in_proj_qkv.weight", 0, qkv);
    Split(a + "conv1d.weight", 0, qkv);
    Split(a + "in_proj_z.weight", 0, Scaled(values, Dv));
    Split(a + "in_proj_b.weight", 0, values);
    Split(a + "in_proj_a.weight", 0, values);
    Split(a + "A", 0, values);
    Split(a + "dt_bias", 0, values);
    Keep(a + "norm.weight");
    Split(a + "out_proj.weight", 1, Scaled(values, Dv));
  }

  void FeedForward(const std::string& p) {
    if (!c_.is_moe()) {
      Share(p + "mlp.gate_proj.weight", 0, c_.intermediate_size);
      Share(p + "mlp.up_proj.weight", 0, c_.intermediate_size);
      Share(p + "mlp.down_proj.weight", 1, c_.intermediate_size);
      return;
    }
    Keep(p + "mlp.gate.weight");
    if (local_.local_experts > 0) {  // expert parallelism: whole experts, a view of the checkpoint
      const Run experts{local_.expert_begin, local_.local_experts};
      Split(p + "mlp.experts.gate_proj", 0, {experts});
      Split(p + "mlp.experts.up_proj", 0, {experts});
      Split(p + "mlp.experts.down_proj", 0, {experts});
    } else {
      Share(p + "mlp.experts.gate_proj", 1, c_.moe_intermediate_size);
      Share(p + "mlp.experts.up_proj", 1, c_.moe_intermediate_size);
      Share(p + "mlp.experts.down_proj", 2, c_.moe_intermediate_size);
    }
    if (c_.shared_expert_intermediate_size > 0) {
      Share(p + "mlp.shared_expert.gate_proj.weight", 0, c_.shared_expert_intermediate_size);
      Share(p + "mlp.shared_expert.up_proj.weight", 0, c_.shared_expert_intermediate_size);
      Share(p + "mlp.shared_expert.down_proj.weight", 1, c_.shared_expert_intermediate_size);
      Keep(p + "mlp.shared_expert_gate.weight");
    }
  }

  WeightStore Take() { return std::move(out_); }

 private:
  const ModelConfig& c_;
  const ModelConfig& local_;
  const WeightStore& in_;
  int rank_, world_;
  WeightStore out_;
};

}  // namespace

ModelConfig ShardModelConfig(const ModelConfig& config, int rank, int world_size, bool expert_parallel) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw vt::Error("tensor parallel: rank " + std::to_string(rank) + " is not in [0, " + std::to_string(world_size) +
                    ")");
  }
  if (expert_parallel && !config.is_moe()) {
    throw vt::Error("--enable-expert-parallel: the model has no experts (architecture " + config.architecture + ")");
  }
  if (expert_parallel && world_size == 1) {
    throw vt::Error("--enable-expert-parallel splits the experts over the ranks of --tensor-parallel-size, which is 1");
  }
  ModelConfig c = config;
  if (world_size == 1) return c;
  if (c.num_layers_of(LayerType::kFullAttention) > 0) {
    RequireDivisible("num_attention_heads", c.num_attention_heads, world_size);
    c.num_attention_heads /= world_size;
    c.num_key_value_heads = KvHeads(config.num_key_value_heads, rank, world_size).length;
  }
  if (c.has_linear_attention()) {
    RequireDivisible("linear_num_key_heads", c.linear_num_key_heads, world_size);
    RequireDivisible("linear_num_value_heads", c.linear_num_value_heads, world_size);
    c.linear_num_key_heads /= world_size;
    c.linear_num_value_heads /= world_size;
  }
  if (c.is_moe()) {
    if (expert_parallel) {  // whole experts per rank; the shared expert stays split by width
      RequireDivisible("num_experts", c.num_experts, world_size);
      c.local_experts = c.num_experts / world_size;
      c.expert_begin = rank * c.local_experts;
    } else {
      RequireDivisible("moe_intermediate_size", c.moe_intermediate_size, world_size);
      c.moe_intermediate_size /= world_size;
    }
    RequireDivisible("shared_expert_intermediate_size", c.shared_expert_intermediate_size, world_size);
    c.shared_expert_intermediate_size /= world_size;
  } else {
    RequireDivisible("intermediate_size", c.intermediate_size, world_size);
    c.intermediate_size /= world_size;
  }
  return c;
}

TensorParallelShard ShardForTensorParallel(const ModelConfig& config, const WeightStore& weights, int rank,
                                           int world_size, bool expert_parallel) {
  TensorParallelShard shard{ShardModelConfig(config, rank, world_size, expert_parallel), WeightStore()};
  if (world_size == 1) {
    for (const auto& [name, tensor] : weights.all()) shard.weights.Add(name, tensor);
    return shard;
  }
  Sharder s(config, shard.config, weights, rank, world_size);
  s.Keep("embed_tokens.weight");
  s.Keep("norm.weight");
  if (!config.tie_word_embeddings) s.Keep("lm_head.weight");  // both split by DecoderModel (VocabShardOf)
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    s.Keep(p + "input_layernorm.weight");
    s.Keep(p + "post_attention_layernorm.weight");
    if (config.layer_types.at(i) == LayerType::kFullAttention) s.Attention(p);
    else s.LinearAttention(p);
    s.FeedForward(p);
  }
  shard.weights = s.Take();
  return shard;
}

VocabShard VocabShardOf(int64_t vocab_size, int rank, int world_size) {
  const int64_t padded = (vocab_size + world_size - 1) / world_size;
  const int64_t begin = std::min<int64_t>(vocab_size, rank * padded);
  return {begin, std::min<int64_t>(vocab_size, begin + padded), padded};
}

}  // namespace vllm
