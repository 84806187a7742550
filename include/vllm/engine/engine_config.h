// Engine configuration: vLLM's engine arguments that vllm-cpp understands, and how
// their defaults resolve against the model and the device.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "vllm/model_loader/model_loader.h"
#include "vt/device.h"

namespace vllm {

// vLLM's --speculative-config (a JSON object): {"method": "mtp",
// "num_speculative_tokens": k, "disable_by_batch_size": n}. Only the model's own MTP
// module drafts here (spec_decode/mtp_proposer.h).
struct SpeculativeConfig {
  std::string method = "mtp";
  int64_t num_speculative_tokens = 1;
  // Drafting stops while more requests than this are running (0: never); unset: the
  // measured policy (spec_decode/draft_policy.h) decides per batch size.
  std::optional<int64_t> disable_by_batch_size;
};

// Parses --speculative-config's JSON; throws std::invalid_argument naming an unknown
// key, a method other than "mtp", or a value out of range.
SpeculativeConfig ParseSpeculativeConfig(const std::string& json);

struct EngineConfig {
  std::string model;                 // HF folder or .gguf file
  std::string tokenizer;             // default: the model path
  vt::Device device = vt::kCpu;
  std::string dtype = "auto";        // activations: auto | float32 | bfloat16 | float16
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  int64_t max_model_len = 0;         // 0: the model's, capped by what the KV cache holds
  int64_t block_size = 16;
  std::optional<int64_t> num_gpu_blocks_override;  // vLLM's name; applies to every device
  double gpu_memory_utilization = 0.9;             // GPU share the engine may use
  // CPU: bytes for KV pages and recurrent state; 0 = min(4 GiB, 40% of available RAM).
  int64_t cpu_kv_cache_bytes = 0;
  std::optional<bool> enable_prefix_caching;       // default: on (hybrid models: when snapshots fit)
  // Hybrid models: the recurrent state is checkpointed every this many tokens (a
  // multiple of block_size), and at the end of prompts and answers
  // (kv_cache_manager.h); 0 = ResolveCheckpointInterval's default.
  int64_t state_checkpoint_interval = 0;
  // Hybrid models: bytes of state snapshots, taken from the cache budget; 0 = an
  // eighth of it.
  int64_t state_snapshot_memory = 0;
  uint64_t seed = 0;                 // the sampler's generator for requests without a seed
  int num_threads = 0;               // CPU threads (the model on the CPU, grammar masks), 0 = all
  // vLLM's name: run every step op by op; otherwise decode batches of up to
  // max_num_seqs (at most max_cudagraph_capture_size) replay device graphs where the
  // device has them.
  bool enforce_eager = false;
  // vLLM's name: the largest decode batch replayed as a device graph (graphs are
  // captured at start-up for batch sizes up to it; larger batches run op by op).
  // nullopt: kMaxGraphBatch. Given where no graphs run (the CPU, enforce_eager,
  // speculative decoding) the engine refuses it.
  std::optional<int64_t> max_cudagraph_capture_size;
  // vLLM's --reasoning-parser ("" or "qwen3"): structured outputs apply after the
  // reasoning (structured_output_manager.h).
  std::string reasoning_parser;
  // Speculative decoding with the model's MTP module (its weights are then loaded:
  // load_options.load_mtp).
  std::optional<SpeculativeConfig> speculative_config;
  LoadOptions load_options;
  // vLLM's --tensor-parallel-size: the model's heads and widths split over this many
  // ranks, rank 0 in the engine's process and the others in worker processes it
  // starts (executor/multiproc_executor.h). CPU only (Gloo); num_threads is then per
  // rank (0: the hardware threads divided among the ranks).
  int64_t tensor_parallel_size = 1;
  // MoE models with tensor_parallel_size N > 1: each rank holds E / N whole experts
  // instead of every expert's 1/N width (vLLM's --enable-expert-parallel).
  bool enable_expert_parallel = false;
  // Across hosts (torchrun's --nnodes, --master-addr, --master-port): this engine is
  // node 0 of `nnodes`, holding ranks [0, tensor_parallel_size / nnodes); rank 0
  // serves the ranks' rendezvous on master_port and every rank reaches it at
  // master_addr (multiproc_executor.h). The other nodes run `serve --node-rank R`.
  int64_t nnodes = 1;
  std::string master_addr;
  int64_t master_port = 0;
  // The program the workers run (`PROGRAM tensor-parallel-worker ...`); empty: this
  // executable. Tests set it to the built vllm-cpp.
  std::string tensor_parallel_worker_program;
  // Where the engine's startup lines go (the cache sizing, cache_sizing.h); empty:
  // stderr, prefixed "vllm-cpp: ".
  std::function<void(const std::string&)> on_log;
};

// The largest decode batch captured as a device graph (vLLM's default too).
inline constexpr int64_t kMaxGraphBatch = 512;

// The checkpoint interval of a hybrid model: the config's, or for 0 the default.
// On the CPU 512 tokens (8 of GDN's 64-token chunks, so checkpoints never cut one;
// it bounds what a hit recomputes past the last checkpoint; a chunk's speed hardly
// depends on its length there). On a GPU the step's token budget
// (max_num_batched_tokens) rounded down to a block multiple, at least 512: chunks
// end at checkpoints, and a GPU forward's cost per token falls with its length, so
// checkpoints at 512 cut a lone 2048-token prompt into four forwards (35B-A3B Q8_0
// on an H200: 4,779 tokens/s against 10,698 in one). Rounded up to a block multiple.
int64_t ResolveCheckpointInterval(const EngineConfig& config);

// Activation dtype for `dtype` ("auto": f32 on the CPU, else the checkpoint's float
// dtype, bf16 for quantized checkpoints). Throws on unknown names.
vt::DType ResolveActivationDtype(const std::string& dtype, const ModelConfig& model, vt::Device device);

}  // namespace vllm
