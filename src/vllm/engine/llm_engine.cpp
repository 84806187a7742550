#include "vllm/engine/llm_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <thread>

#include "output_processor.h"
#include "vllm/distributed/gloo_communicator.h"
#include "vllm/distributed/tensor_parallel.h"
#include "vllm/engine/structured_output_manager.h"
#include "vllm/executor/multiproc_executor.h"
#include "vllm/model_loader/embedded_files.h"
#include "vllm/model_executor/models/model_registry.h"
#include "vllm/model_executor/models/decoder_model.h"
#include "vllm/tokenizer/gguf_tokenizer_data.h"
#include "vllm/worker/cache_engine.h"
#include "vllm/worker/memory_profiler.h"
#include "vt/device_graph.h"
#include "vt/ops.h"

namespace vllm {
namespace {

// Whether `path` carries a tokenizer (an HF folder with tokenizer.json, or a GGUF with
// tokenizer.ggml.* metadata).
bool HasTokenizer(const std::string& path, const LoadedModel& loaded) {
  namespace fs = std::filesystem;
  if (!IsEmbeddedFile(path) && fs::is_directory(path)) return fs::exists(fs::path(path) / "tokenizer.json");
  return loaded.gguf_metadata && loaded.gguf_metadata->Find("tokenizer.ggml.tokens") != nullptr;
}

// --tokenizer's tokenizer, else the model's own when it has one. A .gguf model's is built
// from the metadata the loader already parsed instead of opening the file again.
std::optional<Tokenizer> LoadTokenizer(const EngineConfig& config, const LoadedModel& loaded) {
  if (!config.tokenizer.empty()) return Tokenizer::FromPath(config.tokenizer);
  if (!HasTokenizer(config.model, loaded)) return std::nullopt;
  if (loaded.gguf_metadata &&
      (std::filesystem::path(config.model).extension() == ".gguf" || IsEmbeddedFile(config.model))) {
    return Tokenizer::FromGguf(GgufTokenizerDataFromMetadata(*loaded.gguf_metadata));
  }
  return Tokenizer::FromPath(config.model);
}

// A tokenizer whose ids reach past the model's vocabulary would fail at the first
// request that produces one (or embed a row that does not exist): refuse it here.
void CheckTokenizerFitsModel(const Tokenizer& tokenizer, const ModelConfig& model, const std::string& model_path) {
  if (tokenizer.vocab_size() > model.vocab_size) {
    throw std::invalid_argument("the tokenizer at " + tokenizer.source() + " has " +
                                std::to_string(tokenizer.vocab_size()) + " token ids but the model at " + model_path +
                                " has a vocabulary of " + std::to_string(model.vocab_size) +
                                " (vocab_size): use the model's own tokenizer or a --tokenizer made for it");
  }
}

// EOS ids from the model's config must be tokens the model can produce.
void CheckEosIds(const ModelConfig& model, const std::string& model_path) {
  for (int64_t id : model.eos_token_ids) {
    if (id < 0 || id >= model.vocab_size) {
      throw std::invalid_argument("the model at " + model_path + " names eos_token_id " + std::to_string(id) +
                                  ", outside its vocabulary of " + std::to_string(model.vocab_size) + " tokens");
    }
  }
}

// "on (...)" or "off (...)": the prefix caching the engine chose, and why.
std::string PrefixCachingReason(std::optional<bool> asked, bool attention_only, const CachePlan& plan,
                                int64_t checkpoint_interval) {
  const std::string why = !asked ? "the default" : *asked ? "--enable-prefix-caching" : "--no-enable-prefix-caching";
  if (asked && !*asked) return "off (" + why + ")";
  if (attention_only) return "on (" + why + (asked ? ")" : " for attention-only models)");
  if (plan.num_state_snapshots == 0) {
    return "off (no memory left for a Gated DeltaNet state snapshot of " +
           std::to_string(plan.state_bytes / std::max<int64_t>(plan.num_state_slots, 1)) +
           " bytes; raise --state-snapshot-memory or the KV cache memory)";
  }
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.2f", static_cast<double>(plan.snapshot_bytes) / (1 << 30));
  return "on (" + why + "; hybrid model: Gated DeltaNet state snapshots every " + std::to_string(checkpoint_interval) +
         " tokens and at the ends of prompts and answers, " + std::to_string(plan.num_state_snapshots) + " in " + gib +
         " GiB)";
}

// A GGUF file (not a folder or an embedded file) of at most half the memory the OS
// reports available: then the CPU engine reads it into huge pages (FileResidency)
// rather than mapping it; a larger one stays mapped, so the OS can page it.
bool FitsInMemoryTwice(const std::string& path) {
  std::error_code error;
  if (IsEmbeddedFile(path) || !std::filesystem::is_regular_file(path, error)) return false;
  const uintmax_t file_bytes = std::filesystem::file_size(path, error);
  if (error) return false;
  const auto available = vt::GetDeviceBackend(vt::DeviceType::kCPU).GetMemoryInfo(0).free_bytes;
  return file_bytes <= static_cast<uintmax_t>(available) / 2;
}

int64_t CheckpointBytes(const LoadedModel& loaded) {
  int64_t bytes = 0;
  for (const auto& [name, t] : loaded.weights.all()) bytes += vt::BytesFor(t.dtype(), t.numel());
  return bytes;
}

}  // namespace

LLMEngine::LLMEngine(const EngineConfig& config, const std::function<void(int64_t, int64_t)>& on_progress)
    : config_(config) {
  vt::SetNumThreads(config.num_threads);
  if (config.device.type != vt::DeviceType::kCPU && !vt::IsDeviceAvailable(config.device)) {
    vt::GetDeviceBackend(config.device.type);  // throws with the reason the backend is missing
    throw std::invalid_argument("device " + config.device.ToString() + " does not exist on this machine");
  }
  if (on_progress) on_progress(0, 3);
  LoadOptions load_options = config.load_options;
  if (config.speculative_config) load_options.load_mtp = true;
  // One rank only: a tensor-parallel rank maps the file and touches only its shard.
  const bool one_cpu_rank = config.device.type == vt::DeviceType::kCPU && config.tensor_parallel_size == 1;
  if (one_cpu_rank && FitsInMemoryTwice(config.model)) {
    load_options.weight_residency = FileResidency::kHugePageCopy;
  }
  loaded_ = LoadModel(config.model, load_options);
  CheckEosIds(loaded_.config, config.model);
  tokenizer_ = LoadTokenizer(config, loaded_);
  if (tokenizer_) CheckTokenizerFitsModel(*tokenizer_, loaded_.config, config.model);
  if (on_progress) on_progress(1, 3);
  ModelOptions options{config.device, ResolveActivationDtype(config.dtype, loaded_.config, config.device)};
  if (config.nnodes != 1 && config.tensor_parallel_size == 1) {
    throw std::invalid_argument("--nnodes " + std::to_string(config.nnodes) +
                                " spreads the ranks of --tensor-parallel-size, which is 1");
  }
  options.enable_expert_parallel = config.enable_expert_parallel;  // refused by Create without ranks
  if (config.tensor_parallel_size != 1) {
    StartTensorParallelWorkers(options.activation_dtype);
    options.tensor_parallel = &executor_->group();
  }
  model_ = ModelRegistry::Create(loaded_, options);
  if (config.speculative_config) BuildProposer(options);
  if (on_progress) on_progress(2, 3);

  for (int64_t id : loaded_.config.eos_token_ids) eos_token_ids_.push_back(static_cast<int32_t>(id));
  if (tokenizer_ && tokenizer_->eos_token_id() &&
      std::find(eos_token_ids_.begin(), eos_token_ids_.end(), *tokenizer_->eos_token_id()) == eos_token_ids_.end()) {
    eos_token_ids_.push_back(*tokenizer_->eos_token_id());
  }
  // A GPU engine fills the masks while this thread queues the forward and a
  // background thread precomputes grammars' masks: by default the fill leaves those
  // two a core each, so that it never takes the core of the thread launching the step.
  const bool on_gpu = config.device.type != vt::DeviceType::kCPU;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int mask_threads = config.num_threads > 0 ? config.num_threads : on_gpu ? std::max(1, cores - 2) : cores;
  structured_outputs_ = std::make_unique<StructuredOutputManager>(
      tokenizer_ ? &*tokenizer_ : nullptr, eos_token_ids_, static_cast<int32_t>(loaded_.config.vocab_size),
      config.reasoning_parser, mask_threads, /*precompute_masks=*/on_gpu, /*fill_during_forward=*/on_gpu);
  std::vector<LayerCacheSpec> spec = model_->cache_spec();
  if (mtp_head_spec_) spec.push_back(*mtp_head_spec_);  // the MTP head's attention layer, last
  SizeCaches(spec, options.activation_dtype);
  if (on_progress) on_progress(3, 3);
}

LLMEngine::~LLMEngine() = default;

void LLMEngine::StartTensorParallelWorkers(vt::DType activation_dtype) {
  const int64_t tp = config_.tensor_parallel_size;
  if (tp < 1 || tp > 64) throw std::invalid_argument("--tensor-parallel-size must be in [1, 64], got " + std::to_string(tp));
  if (config_.device.type != vt::DeviceType::kCPU) {
    throw std::invalid_argument("--tensor-parallel-size " + std::to_string(tp) + " runs on the CPU only (Gloo); " +
                                "NCCL for " + config_.device.ToString() + " is not built");
  }
  if (config_.speculative_config) {
    throw std::invalid_argument("--speculative-config with --tensor-parallel-size above 1 is not supported");
  }
  if (!GlooAvailable()) {
    throw std::invalid_argument("--tensor-parallel-size " + std::to_string(tp) +
                                ": this vllm-cpp was built without Gloo (Debian's libgloo-dev)");
  }
  // A size that does not divide, or experts to split in a model without them: named
  // before any worker starts.
  ShardModelConfig(loaded_.config, 0, static_cast<int>(tp), config_.enable_expert_parallel);
  const MultiNode nodes{.nnodes = static_cast<int>(config_.nnodes),
                        .master_addr = config_.master_addr,
                        .master_port = static_cast<int>(config_.master_port)};
  // Each rank its own share of its host's cores (vLLM's CPU workers bind theirs).
  const int64_t ranks_here = RanksPerNode(static_cast<int>(tp), nodes);  // checks the nodes before any worker starts
  const int threads = config_.num_threads > 0
                          ? config_.num_threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency() / ranks_here));
  vt::SetNumThreads(threads);
  executor_ = std::make_unique<MultiprocExecutor>(static_cast<int>(tp), config_.tensor_parallel_worker_program,
                                                  std::chrono::minutes(10), nodes);
  executor_->SendModel({.model = config_.model,
                        .gdn_value_head_order = config_.load_options.gdn_value_head_order,
                        .activation_dtype = activation_dtype,
                        .num_threads = threads,
                        .enable_expert_parallel = config_.enable_expert_parallel});
  Log("tensor parallel: " + std::to_string(tp) + " ranks (rank 0 here, " + std::to_string(ranks_here - 1) +
      " worker processes" +
      (config_.nnodes > 1 ? ", " + std::to_string(tp - ranks_here) + " ranks on " + std::to_string(config_.nnodes - 1) +
                                " other nodes meeting at " + config_.master_addr + ":" +
                                std::to_string(config_.master_port)
                          : std::string()) +
      "), " + std::to_string(threads) + " CPU threads each, Gloo collectives" +
      (config_.enable_expert_parallel ? ", experts split whole between the ranks (expert parallel)" : ""));
}

void LLMEngine::BuildProposer(const ModelOptions& options) {
  const SpeculativeConfig& spec = *config_.speculative_config;
  const auto* trunk = dynamic_cast<const DecoderModel*>(model_.get());
  if (loaded_.config.mtp_num_hidden_layers < 1 || trunk == nullptr) {
    throw std::invalid_argument("--speculative-config method mtp: the model at " + config_.model +
                                " has no MTP module (mtp_num_hidden_layers 0; GGUF: nextn_predict_layers)");
  }
  auto head = std::make_unique<MtpHead>(loaded_.config, loaded_.weights, options, *trunk);
  mtp_head_spec_ = head->cache_spec();
  proposer_ = std::make_unique<MtpProposer>(*trunk, std::move(head), spec.num_speculative_tokens,
                                            static_cast<int64_t>(model_->cache_spec().size()));
}

int64_t LLMEngine::SnapshotBudget(int64_t slot_bytes, int64_t cache_budget) const {
  if (slot_bytes == 0 || !config_.enable_prefix_caching.value_or(true)) return 0;
  return config_.state_snapshot_memory > 0 ? config_.state_snapshot_memory : cache_budget / 8;
}

void LLMEngine::SizeCaches(const std::vector<LayerCacheSpec>& spec, vt::DType cache_dtype) {
  const int64_t bs = config_.block_size;
  if (bs < 1) throw std::invalid_argument("--block-size must be >= 1, got " + std::to_string(bs));
  int64_t model_len = config_.max_model_len > 0 ? config_.max_model_len : loaded_.config.max_position_embeddings;
  if (model_len <= 0) model_len = 4096;
  const int64_t slot_bytes = StateSlotBytes(spec);
  // Decode graphs pad batches with rows whose recurrent state goes to one more
  // slot than the scheduler hands out (decode_graphs.h).
  // Speculative steps run eagerly (their drafts need the trunk's hidden states).
  const bool use_graphs = !config_.enforce_eager && !proposer_ && vt::GraphsSupported(config_.device);
  if (const std::optional<int64_t> cap = config_.max_cudagraph_capture_size) {
    if (*cap < 1) throw std::invalid_argument("--max-cudagraph-capture-size must be >= 1, got " + std::to_string(*cap));
    if (!use_graphs) {
      throw std::invalid_argument(
          "--max-cudagraph-capture-size is given, but no decode graphs run here (" +
          std::string(config_.enforce_eager ? "--enforce-eager"
                      : proposer_          ? "speculative decoding runs its steps eagerly"
                                           : config_.device.ToString() + " has no device graphs") +
          ")");
    }
  }
  const int64_t padding_slots = use_graphs && slot_bytes > 0 ? 1 : 0;
  // Speculative decoding: a backup slot per request that may verify drafts (the GDN
  // rollback, model_runner_spec.cpp), after the padding slot.
  const int64_t backup_slots = proposer_ && slot_bytes > 0 ? config_.max_num_seqs : 0;
  std::optional<DeviceMemoryProfile> profile;
  int64_t budget = 0;
  if (config_.device.type == vt::DeviceType::kCPU) {
    budget = CpuCacheBudget(config_.cpu_kv_cache_bytes,
                            vt::GetDeviceBackend(vt::DeviceType::kCPU).GetMemoryInfo(config_.device.index));
  } else {
    profile = ProfileDeviceMemory(*model_, bs, cache_dtype,
                                  {.max_num_batched_tokens = config_.max_num_batched_tokens,
                                   .max_num_seqs = config_.max_num_seqs,
                                   .max_model_len = model_len,
                                   .decode_graphs = use_graphs});
    budget = GpuCacheBudget(*profile, config_.gpu_memory_utilization);
  }
  cache_plan_ = PlanCaches({.budget_bytes = budget,
                            .block_bytes = KvBlockBytes(spec, bs, cache_dtype),
                            .slot_bytes = slot_bytes,
                            .block_size = bs,
                            .max_num_seqs = config_.max_num_seqs,
                            .model_len = model_len,
                            .num_padding_slots = padding_slots + backup_slots,
                            .snapshot_budget_bytes = SnapshotBudget(slot_bytes, budget),
                            .num_gpu_blocks_override = config_.num_gpu_blocks_override},
                           config_.device);
  const int64_t capacity = cache_plan_.num_tokens();
  if (config_.max_model_len > 0 && capacity < config_.max_model_len) {
    throw std::invalid_argument("--max-model-len " + std::to_string(config_.max_model_len) + " needs " +
                                std::to_string((config_.max_model_len + bs - 1) / bs + 1) + " KV blocks, the cache has " +
                                std::to_string(cache_plan_.num_blocks) +
                                "; lower --max-model-len or give the cache more memory");
  }
  max_model_len_ = std::min(model_len, capacity);
  Log(DescribeCaches(cache_plan_, max_model_len_, config_.device, budget, profile ? &*profile : nullptr,
                     config_.gpu_memory_utilization, CheckpointBytes(loaded_)));
  BuildWorker(spec, cache_dtype, slot_bytes == 0, use_graphs, padding_slots, backup_slots);
}

void LLMEngine::BuildWorker(const std::vector<LayerCacheSpec>& spec, vt::DType cache_dtype, bool attention_only,
                            bool use_graphs, int64_t padding_slots, int64_t backup_slots) {
  const int64_t bs = config_.block_size;
  const bool prefix_caching =
      config_.enable_prefix_caching.value_or(true) && (attention_only || cache_plan_.num_state_snapshots > 0);
  const int64_t interval = ResolveCheckpointInterval(config_);
  prefix_caching_reason_ = PrefixCachingReason(config_.enable_prefix_caching, attention_only, cache_plan_, interval);
  if (!prefix_caching && config_.enable_prefix_caching.value_or(false)) Log("prefix caching is " + prefix_caching_reason_);
  if (interval < 1 || interval > std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument("--state-checkpoint-interval must be in [1, 2^31), got " + std::to_string(interval));
  }
  cache_config_ = {.block_size = static_cast<int32_t>(bs),
                   .num_blocks = static_cast<int32_t>(cache_plan_.num_blocks),
                   .num_state_slots = static_cast<int32_t>(cache_plan_.num_state_slots),
                   .enable_prefix_caching = prefix_caching,
                   .num_state_snapshots = static_cast<int32_t>(prefix_caching ? cache_plan_.num_state_snapshots : 0),
                   .state_checkpoint_interval = static_cast<int32_t>(interval)};
  SchedulerConfig sched{.max_num_batched_tokens = config_.max_num_batched_tokens,
                        .max_num_seqs = config_.max_num_seqs,
                        .max_model_len = max_model_len_,
                        .enable_chunked_prefill = true,
                        .num_lookahead_tokens = proposer_ ? proposer_->num_speculative_tokens() : 0};
  scheduler_ = std::make_unique<Scheduler>(sched, cache_config_);
  std::optional<DecodeGraphOptions> graphs;
  if (use_graphs) {
    graphs = DecodeGraphOptions{.max_batch = std::min(config_.max_num_seqs,
                                                      config_.max_cudagraph_capture_size.value_or(kMaxGraphBatch)),
                                .max_model_len = max_model_len_,
                                .padding_state_slot = static_cast<int32_t>(cache_plan_.num_state_slots)};
  }
  ModelCaches caches =
      AllocateCaches(spec, cache_plan_.num_blocks, bs, cache_plan_.num_state_slots + padding_slots + backup_slots,
                     cache_dtype, config_.device, cache_config_.num_state_snapshots);
  std::optional<SpeculativeDecoding> speculative;
  if (proposer_) {
    speculative = SpeculativeDecoding{
        .proposer = std::move(proposer_),
        .backup_slot_base = static_cast<int32_t>(cache_plan_.num_state_slots + padding_slots),
        .num_backup_slots = static_cast<int32_t>(backup_slots),
        .disable_by_batch_size = config_.speculative_config->disable_by_batch_size};
    Log("speculative decoding: MTP, " + std::to_string(speculative->proposer->num_speculative_tokens()) +
        " draft tokens a step" +
        (!speculative->disable_by_batch_size ? ", on where it measures faster (per batch size)"
         : *speculative->disable_by_batch_size > 0
             ? ", off while more than " + std::to_string(*speculative->disable_by_batch_size) + " requests run"
             : "") +
        "; steps run eagerly (no decode graphs)");
  }
  if (executor_) {
    executor_->SendCaches({.num_blocks = cache_plan_.num_blocks,
                           .block_size = bs,
                           .num_state_slots = cache_plan_.num_state_slots + padding_slots + backup_slots,
                           .num_state_snapshots = cache_config_.num_state_snapshots,
                           .cache_dtype = cache_dtype,
                           .seed = config_.seed});
  }
  runner_ = std::make_unique<ModelRunner>(*model_, std::move(caches), bs, config_.seed, graphs, std::move(speculative));
  outputs_ = std::make_unique<OutputProcessor>(tokenizer_);
  // Every decode shape captured now, as vLLM captures its cudagraph sizes, so no
  // request waits for a capture.
  if (const std::optional<DecodeGraphs::CaptureSummary> captured = runner_->CaptureDecodeGraphs()) {
    std::string line = "captured " + std::to_string(captured->captured) + " decode graphs (batch sizes 1.." +
                       std::to_string(graphs->max_batch) + ", contexts up to " + std::to_string(max_model_len_) +
                       ") in " + std::to_string(static_cast<int64_t>(captured->seconds * 1e3)) + " ms";
    if (captured->failed > 0) {
      line += "; " + std::to_string(captured->failed) + " shapes run eagerly: " + captured->error;
    }
    Log(line);
  }
}

void LLMEngine::Log(const std::string& line) const {
  if (config_.on_log) config_.on_log(line);
  else std::fprintf(stderr, "vllm-cpp: %s\n", line.c_str());
}

const Tokenizer& LLMEngine::tokenizer() const {
  if (!tokenizer_) throw std::logic_error("the model at " + config_.model + " has no tokenizer");
  return *tokenizer_;
}

std::vector<int32_t> LLMEngine::Encode(const std::string& text) const {
  if (!tokenizer_) {
    throw std::invalid_argument("the model at " + config_.model +
                                " has no tokenizer (tokenizer.json or GGUF tokenizer metadata): pass token ids");
  }
  return tokenizer_->Encode(text);
}

void LLMEngine::AddRequest(const std::string& request_id, std::vector<int32_t> prompt_token_ids,
                           const SamplingParams& params) {
  const int64_t vocab = loaded_.config.vocab_size;
  params.Validate(vocab);
  if (!params.stop.empty() && !tokenizer_) {
    throw std::invalid_argument("stop strings need a tokenizer; the model at " + config_.model + " has none");
  }
  for (size_t i = 0; i < prompt_token_ids.size(); ++i) {
    if (prompt_token_ids[i] < 0 || prompt_token_ids[i] >= vocab) {
      throw std::invalid_argument("prompt token " + std::to_string(i) + " has id " +
                                  std::to_string(prompt_token_ids[i]) + ", outside the vocabulary [0, " +
                                  std::to_string(vocab) + ")");
    }
  }
  auto request = std::make_unique<Request>(request_id, prompt_token_ids, params,
                                           params.ignore_eos ? std::vector<int32_t>{} : eos_token_ids_,
                                           next_arrival_++);
  if (params.structured_outputs) {
    request->structured_output_request = structured_outputs_->MakeRequest(params, prompt_token_ids);
  }
  scheduler_->add_request(std::move(request));  // validates lengths and id uniqueness
  outputs_->AddRequest(request_id, prompt_token_ids, params);
}

std::optional<RequestOutput> LLMEngine::AbortRequest(const std::string& request_id) {
  scheduler_->finish_requests({request_id}, RequestStatus::kFinishedAborted);  // the runner frees it next step
  if (!outputs_->Has(request_id)) return std::nullopt;
  RequestOutput output = outputs_->Finish(request_id, "abort");
  output.finished = true;
  output.finish_reason = "abort";
  return output;
}

std::vector<RequestOutput> LLMEngine::Step() {
  std::vector<RequestOutput> results;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point step_start = Clock::now();
  SchedulerOutput scheduled = scheduler_->schedule();
  structured_outputs_->FillBitmask(scheduled, *scheduler_);
  const Clock::time_point execute_start = Clock::now();
  // On a GPU the bitmask fills while the forward runs: its threads hold `scheduled`
  // and the matchers until awaited, on every way out of Execute (errors included).
  struct AwaitBitmask {
    SchedulerOutput& output;
    ~AwaitBitmask() {
      if (!output.await_grammar_bitmask) return;
      try {
        output.await_grammar_bitmask();
      } catch (...) {  // Execute threw first; the fill's own error is the later one
      }
    }
  } await_on_exit{scheduled};
  last_step_new_req_ids_.clear();
  for (const NewRequestData& r : scheduled.scheduled_new_reqs) last_step_new_req_ids_.push_back(r.req_id);
  last_step_num_tokens_ = scheduled.total_num_scheduled_tokens;
  RunnerOutput ran;
  if (executor_) {
    if (dead_) throw EngineDeadError(*dead_);
    try {
      executor_->SendStep(scheduled);  // the workers run the same forward
      ran = runner_->Execute(scheduled);
    } catch (const std::exception& e) {
      // The ranks may have stopped at different collectives: none can go on.
      dead_ = std::string("a tensor-parallel step failed: ") + e.what();
      throw EngineDeadError(*dead_);
    }
  } else {
    ran = runner_->Execute(scheduled);  // with nothing scheduled, only frees finished requests
  }
  if (scheduled.await_grammar_bitmask) {  // before the matchers advance; rethrows a row's error
    scheduled.await_grammar_bitmask();
    scheduled.await_grammar_bitmask = nullptr;
  }
  structured_outputs_->RecycleBitmask(scheduled);  // the runner is done with the rows
  const Clock::time_point outputs_start = Clock::now();
  // Every way out from here records the step's phases.
  struct RecordPhases {
    StepPhases& phases;
    Clock::time_point step_start, execute_start, outputs_start;
    ~RecordPhases() {
      phases = {.schedule_s = std::chrono::duration<double>(execute_start - step_start).count(),
                .execute_s = std::chrono::duration<double>(outputs_start - execute_start).count(),
                .outputs_s = std::chrono::duration<double>(Clock::now() - outputs_start).count()};
    }
  } record_phases{last_step_phases_, step_start, execute_start, outputs_start};
  if (scheduled.empty()) return results;
  for (const auto& [id, chunk] : ran.prompt_logprobs) outputs_->AddPromptLogprobs(id, chunk);
  // Each request's results in order: one sampled token, or its accepted drafts and
  // the token after them.
  std::unordered_map<std::string, std::vector<SampleResult>> step_results = std::move(ran.verified);
  for (auto& [id, result] : ran.sampled) step_results[id] = {std::move(result)};
  std::unordered_map<std::string, std::vector<int32_t>> sampled;
  for (const auto& [id, list] : step_results) {
    for (const SampleResult& r : list) sampled[id].push_back(r.token_id);
  }
  const std::vector<RequestUpdate> updates = scheduler_->update_from_sampled_tokens(scheduled, sampled);
  scheduler_->update_draft_token_ids(ran.draft_token_ids);  // finished requests are skipped
  const std::unordered_map<std::string, RequestStatus> grammar_ends = AdvanceGrammars(updates);
  for (const RequestUpdate& update : updates) {
    const std::vector<SampleResult>& list = step_results.at(update.req_id);
    std::optional<std::string> stop;
    for (size_t i = 0; i < update.new_token_ids.size() && !stop; ++i) {
      stop = outputs_->AddTokens(update.req_id, {update.new_token_ids[i]},
                                 list[i].logprobs.empty() ? nullptr : &list[i].logprobs);
    }
    std::string finish_reason = FinishReason(update.status);
    const auto grammar_ended = grammar_ends.find(update.req_id);
    const std::optional<RequestStatus> grammar_end = stop || grammar_ended == grammar_ends.end()
                                                         ? std::nullopt
                                                         : std::optional(grammar_ended->second);
    if (grammar_end) {
      scheduler_->finish_requests({update.req_id}, *grammar_end);
      finish_reason = FinishReason(*grammar_end);
    } else if (stop && !update.finished()) {
      scheduler_->finish_requests({update.req_id}, RequestStatus::kFinishedStopped);
      finish_reason = "stop";
    } else if (stop) {
      finish_reason = "stop";  // a stop string on the last allowed token still reports "stop"
    }
    if (finish_reason.empty()) {
      results.push_back(outputs_->Snapshot(update.req_id));
    } else {
      results.push_back(outputs_->Finish(update.req_id, finish_reason));
    }
  }
  return results;
}

std::unordered_map<std::string, RequestStatus> LLMEngine::AdvanceGrammars(const std::vector<RequestUpdate>& updates) {
  std::vector<const RequestUpdate*> advanced;
  std::vector<StructuredOutputManager::AcceptItem> items;
  for (const RequestUpdate& update : updates) {
    if (update.finished()) continue;  // its grammar is done with
    const Request* request = scheduler_->get_request(update.req_id);
    if (request == nullptr || !request->structured_output_request) continue;
    advanced.push_back(&update);
    items.emplace_back(request->structured_output_request.get(), &update.new_token_ids);
  }
  std::unordered_map<std::string, RequestStatus> ends;
  if (items.empty()) return ends;
  const std::vector<bool> accepted = structured_outputs_->AcceptTokensOfStep(items);
  for (size_t i = 0; i < items.size(); ++i) {
    // A refused token means the mask allowed none (no token spells the next byte); the
    // request cannot go on inside its grammar.
    if (!accepted[i]) {
      ends.emplace(advanced[i]->req_id, RequestStatus::kFinishedAborted);
    } else if (items[i].first->matcher.IsTerminated()) {
      ends.emplace(advanced[i]->req_id, RequestStatus::kFinishedStopped);
    }
  }
  return ends;
}

EngineStats LLMEngine::stats() const {
  return {.num_running = scheduler_->num_running(),
          .num_waiting = scheduler_->num_waiting(),
          .num_preemptions = scheduler_->num_preemptions(),
          .kv_cache_usage = scheduler_->kv_cache_manager().get_usage(),
          .num_kv_blocks = cache_config_.num_blocks,
          .num_state_slots = cache_config_.num_state_slots,
          .max_model_len = max_model_len_,
          .prefix_cache_queries = scheduler_->kv_cache_manager().prefix_cache_queries(),
          .prefix_cache_hits = scheduler_->kv_cache_manager().prefix_cache_hits(),
          .num_state_snapshots = cache_config_.num_state_snapshots,
          .num_state_snapshots_used = scheduler_->kv_cache_manager().num_state_snapshots_used(),
          .num_tokens_computed = runner_->num_tokens_computed(),
          .prefix_caching = cache_config_.enable_prefix_caching,
          .block_size = config_.block_size,
          .spec_decoding = scheduler_->spec_decoding_stats(),
          .speculative_decoding = config_.speculative_config.has_value(),
          .structured_outputs = structured_outputs_->stats()};
}

}  // namespace vllm
