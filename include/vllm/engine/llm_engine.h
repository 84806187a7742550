// LLMEngine: the synchronous engine, usable as a C++ library.
//
//   vllm::LLMEngine engine(config);
//   engine.AddRequest("r0", engine.Encode("Hello"), params);
//   while (engine.HasUnfinishedRequests())
//     for (const vllm::RequestOutput& out : engine.Step()) ...
//
// One Step() = schedule -> model runner (forward + sampling) -> scheduler update ->
// output processing (incremental detokenization, stop strings, logprobs).
#pragma once

#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "vllm/core/scheduler.h"
#include "vllm/engine/cache_sizing.h"
#include "vllm/engine/engine_config.h"
#include "vllm/engine/structured_output_manager.h"
#include "vllm/engine/request_output.h"
#include "vllm/model_executor/model.h"
#include "vllm/model_loader/model_loader.h"
#include "vllm/sample/sampling_params.h"
#include "vllm/tokenizer/tokenizer.h"
#include "vllm/worker/model_runner.h"

namespace vllm {

class OutputProcessor;
class MultiprocExecutor;

struct EngineStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  int64_t num_preemptions = 0;
  double kv_cache_usage = 0;  // fraction of KV blocks in use
  int64_t num_kv_blocks = 0;
  int64_t num_state_slots = 0;
  int64_t max_model_len = 0;
  int64_t prefix_cache_queries = 0;  // tokens looked up in the prefix cache, cumulative
  int64_t prefix_cache_hits = 0;     // of those, tokens found
  int64_t num_state_snapshots = 0;       // hybrid prefix caching: snapshots in the pool
  int64_t num_state_snapshots_used = 0;  // of those, holding a valid state
  int64_t num_tokens_computed = 0;       // tokens the model forwarded, cumulative (hits excluded)
  bool prefix_caching = false;
  int64_t block_size = 0;
  SpecDecodingStats spec_decoding;  // cumulative; all zero without speculative decoding
  bool speculative_decoding = false;
  StructuredOutputStats structured_outputs;  // cumulative grammar bitmask cost on the host
};

// The engine cannot run another step: a tensor-parallel rank died, or a step failed
// part-way across the ranks (they may no longer agree on their state). Step() throws
// it then and on every later call; a server stops on it (vLLM's EngineDeadError).
class EngineDeadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class LLMEngine {
 public:
  // Loads the model (and its tokenizer when the path has one), sizes the caches.
  // `on_progress(done, total)` is called while weights are prepared. Throws
  // std::invalid_argument when the tokenizer's ids or the config's EOS ids do not
  // fit the model's vocabulary.
  explicit LLMEngine(const EngineConfig& config,
                     const std::function<void(int64_t, int64_t)>& on_progress = {});
  ~LLMEngine();

  // Throws std::invalid_argument for bad parameters, unknown or out-of-range token
  // ids, prompts too long for max_model_len, a duplicate id, stop strings without a
  // tokenizer, or a structured output that does not compile (StructuredOutputError,
  // naming the construct); nothing else is affected.
  void AddRequest(const std::string& request_id, std::vector<int32_t> prompt_token_ids,
                  const SamplingParams& params);
  // Ends a request; returns its final output (finish_reason "abort", what it generated
  // so far as its output_kind says), nullopt when the id is unknown or finished.
  std::optional<RequestOutput> AbortRequest(const std::string& request_id);
  std::vector<RequestOutput> Step();
  // The requests the last Step() scheduled for the first time (their queue time ends
  // there), and the tokens it computed.
  const std::vector<std::string>& last_step_new_req_ids() const { return last_step_new_req_ids_; }
  int64_t last_step_num_tokens() const { return last_step_num_tokens_; }
  // Where the last Step()'s wall time went on the host: scheduling (and starting the
  // grammar masks' fill), the runner (forward and sampling, waiting for the device),
  // and the outputs (matchers, detokenization, finishing). `bench throughput` reports
  // their medians at the full batch.
  struct StepPhases {
    double schedule_s = 0, execute_s = 0, outputs_s = 0;
  };
  const StepPhases& last_step_phases() const { return last_step_phases_; }
  bool HasUnfinishedRequests() const { return scheduler_->has_unfinished_requests(); }

  bool has_tokenizer() const { return tokenizer_.has_value(); }
  const Tokenizer& tokenizer() const;  // throws when the model has none
  std::vector<int32_t> Encode(const std::string& text) const;
  const ModelConfig& model_config() const { return loaded_.config; }
  // The checkpoint as loaded (its weights' dtypes and shapes; `vllm-cpp bench`
  // counts the bytes a step reads from them).
  const LoadedModel& loaded_model() const { return loaded_; }
  const EngineConfig& config() const { return config_; }
  EngineStats stats() const;
  // What the caches were given (cache_sizing.h); also logged once at construction.
  const CachePlan& cache_plan() const { return cache_plan_; }
  // Whether prefix caching is on and why, e.g. "on (the default for attention-only
  // models)", "off (--no-enable-prefix-caching)", "on (the default; hybrid model:
  // Gated DeltaNet state snapshots every 512 tokens ...)" (the startup line says it).
  bool prefix_caching_enabled() const { return cache_config_.enable_prefix_caching; }
  const std::string& prefix_caching_reason() const { return prefix_caching_reason_; }

 private:
  // Profiles the device (GPU) or takes the explicit budget (CPU), plans the caches,
  // logs the figures, then builds the worker.
  void SizeCaches(const std::vector<LayerCacheSpec>& spec, vt::DType cache_dtype);
  // Bytes of the cache budget for state snapshots (0 unless a hybrid model may use
  // prefix caching).
  int64_t SnapshotBudget(int64_t slot_bytes, int64_t cache_budget) const;
  // The scheduler, the caches and the model runner over them, from cache_plan_.
  void BuildWorker(const std::vector<LayerCacheSpec>& spec, vt::DType cache_dtype, bool attention_only,
                   bool use_graphs, int64_t padding_slots, int64_t backup_slots);
  // --speculative-config: the MTP head and its proposer (handed to the runner).
  void BuildProposer(const ModelOptions& options);
  void Log(const std::string& line) const;
  // Advances the grammar of every unfinished request of the step by its new tokens,
  // all at once (StructuredOutputManager::AcceptTokensOfStep). By request id, the
  // status to finish those with whose grammar has terminated (its stop token accepted
  // under ignore_eos) or refused a token; the others are absent.
  std::unordered_map<std::string, RequestStatus> AdvanceGrammars(const std::vector<RequestUpdate>& updates);

  // Starts the tensor-parallel workers (before model_, which holds their group, and
  // destroyed after it); null for one rank.
  void StartTensorParallelWorkers(vt::DType activation_dtype);

  EngineConfig config_;
  std::unique_ptr<MultiprocExecutor> executor_;
  LoadedModel loaded_;
  std::optional<Tokenizer> tokenizer_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<MtpProposer> proposer_;            // until BuildWorker hands it to the runner
  std::optional<LayerCacheSpec> mtp_head_spec_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<OutputProcessor> outputs_;
  std::unique_ptr<StructuredOutputManager> structured_outputs_;
  std::vector<int32_t> eos_token_ids_;
  CachePlan cache_plan_;
  KVCacheConfig cache_config_;
  std::string prefix_caching_reason_;
  int64_t max_model_len_ = 0;
  int64_t next_arrival_ = 0;
  std::vector<std::string> last_step_new_req_ids_;
  int64_t last_step_num_tokens_ = 0;
  StepPhases last_step_phases_;
  std::optional<std::string> dead_;  // why the engine died (EngineDeadError)
};

}  // namespace vllm
