// Constrained decoding in the engine (vLLM v1's StructuredOutputManager): a request
// with SamplingParams::structured_outputs gets a grammar matcher at admission, a row
// of token bitmask in each step where it samples, and its matcher advanced by each
// token it is given (docs/structured_output.md §6).
//
//   AddRequest      MakeRequest: compile (or find in the cache) the grammar; a bad
//                   grammar throws StructuredOutputError before the request is queued
//   Step            schedule -> FillBitmask(output): rows for the requests that sample
//                   -> runner: the row applied to the request's logits, then the sampler
//                   -> update_from_output -> AcceptTokens: the matcher advanced;
//                   the engine finishes a request whose matcher terminated
//
// The matcher lives with the scheduler's request, whose token history survives
// preemption (the request is recomputed from its tokens), so preemption leaves the
// matcher as it is. With a reasoning parser, a prompt that leaves a `<think>` open
// (Qwen3.5's template with thinking on) gets its grammar only from the token after
// the `</think>` the model writes; any other prompt (thinking off renders
// "<think>\n\n</think>") from the first output token.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vllm/core/request.h"
#include "vllm/core/scheduler.h"
#include "vllm/core/scheduler_output.h"
#include "vllm/structured_output/matcher.h"

namespace vllm {

class Tokenizer;

// One request's structured-output state (vLLM's StructuredOutputRequest).
struct StructuredOutputRequest {
  explicit StructuredOutputRequest(std::shared_ptr<const structured_output::CompiledGrammar> grammar)
      : matcher(std::move(grammar)) {}
  structured_output::GrammarMatcher matcher;
  // False while the model is still reasoning: no mask, the matcher waits.
  bool reasoning_ended = true;
};

// What building the grammar bitmasks cost the host, cumulative: steps with at least
// one row, rows filled, the wall time of those fills (from FillBitmask to the last
// row written), and the part of it the step's thread waited for: all of it when the
// fill is synchronous; with fill_during_forward, what was left when the runner asked
// for the rows, right after queueing the forward (the device runs that forward
// meanwhile, so a wait shorter than the forward costs the step nothing). Also the
// matchers' advance by each step's new tokens (AcceptTokens: host time between two
// steps, which nothing hides) and how many tokens it took.
struct StructuredOutputStats {
  int64_t num_bitmask_steps = 0;
  int64_t num_bitmask_rows = 0;
  double bitmask_seconds = 0;
  double bitmask_wait_seconds = 0;
  int64_t num_accepted_tokens = 0;
  double accept_seconds = 0;
};

class StructuredOutputManager {
 public:
  // `tokenizer` null: every structured-output request is refused. `eos_token_ids`
  // end a grammar (allowed only where it can end). `reasoning_parser` is "" or
  // "qwen3" (its `<think>` / `</think>` tokens must be in the vocabulary).
  // `mask_threads` (>= 1) host threads fill a step's bitmask rows (the engine passes
  // its --threads, all cores when 0). With `precompute_masks`, mask_threads background
  // threads compute each new grammar's whole mask cache while the steps run (all on
  // the oldest grammar, splitting its positions), so requests
  // rarely compute a position themselves (the engine asks for it where the model
  // runs on a GPU, whose host cores wait during the forward; on the CPU those cores
  // run the model, and positions no request reaches would be computed for nothing).
  // With `fill_during_forward` (a GPU engine too), FillBitmask only starts the fill on
  // the pool's threads and sets output.await_grammar_bitmask: the runner queues the
  // forward first and waits for the rows only when it samples.
  StructuredOutputManager(const Tokenizer* tokenizer, std::vector<int32_t> eos_token_ids, int32_t vocab_size,
                          const std::string& reasoning_parser, int mask_threads = 1, bool precompute_masks = false,
                          bool fill_during_forward = false);
  ~StructuredOutputManager();

  // The state of a new request with params.structured_outputs. Throws
  // StructuredOutputError (an std::invalid_argument) naming what cannot be compiled.
  std::shared_ptr<StructuredOutputRequest> MakeRequest(const SamplingParams& params,
                                                       const std::vector<int32_t>& prompt_token_ids);
  // Sets output.grammar_bitmask and structured_output_request_ids for the scheduled
  // requests that sample this step with an active grammar; the rows are filled by up
  // to mask_threads threads (a JSON schema's row costs the host ~0.1 ms: 64 of them
  // one after another were a large part of a GPU step). With fill_during_forward the
  // rows are being written when it returns: output.await_grammar_bitmask must be
  // called before the words are read, the matchers advanced or `output` destroyed
  // (it rethrows a row's error). A fill still pending from an earlier step is
  // awaited first.
  void FillBitmask(SchedulerOutput& output, const Scheduler& scheduler);
  // Takes back the words of a step that is done with them, for the next FillBitmask
  // (awaiting the fill first if nobody did).
  void RecycleBitmask(SchedulerOutput& output);
  // Advances the request's matcher by the tokens it was just given (those after
  // `</think>` when reasoning ends among them). Returns false when the matcher
  // refused one (the mask allowed no token, or a stop string cut the output).
  bool AcceptTokens(StructuredOutputRequest& request, const std::vector<int32_t>& new_token_ids);
  // AcceptTokens of every (request, its new tokens) of a step, the results in order;
  // on the mask threads when there are at least kAcceptRowsPerThread requests a
  // thread (a JSON schema's matcher takes ~5 us a token on the GPU machine's host: 64
  // of them one after another were ~0.3 ms of a step that no forward hides). The
  // requests are distinct.
  using AcceptItem = std::pair<StructuredOutputRequest*, const std::vector<int32_t>*>;
  static constexpr size_t kAcceptRowsPerThread = 4;
  std::vector<bool> AcceptTokensOfStep(const std::vector<AcceptItem>& items);

  int64_t num_cached_grammars() const { return static_cast<int64_t>(cache_.size()); }
  const StructuredOutputStats& stats() const { return stats_; }

 private:
  std::shared_ptr<const structured_output::CompiledGrammar> Compile(const StructuredOutputsParams& spec);
  // AcceptTokens without the stats: `accepted` counts the tokens the matcher took.
  bool Advance(StructuredOutputRequest& request, const std::vector<int32_t>& new_token_ids, int64_t& accepted) const;
  bool OpensReasoning(const std::vector<int32_t>& prompt_token_ids) const;

  const Tokenizer* tokenizer_;
  std::vector<int32_t> eos_token_ids_;
  int32_t vocab_size_;
  int mask_threads_;
  bool fill_during_forward_;
  StructuredOutputStats stats_;
  std::vector<uint32_t> spare_bitmask_;  // the last step's words, reused
  // The threads of FillBitmask, started once: starting them every step cost more
  // than a regex's rows (bench/README.md). Synchronous fills: threads 1 ..
  // mask_threads - 1 (the caller is thread 0); fill_during_forward: all mask_threads.
  class MaskFillPool;
  std::unique_ptr<MaskFillPool> pool_;
  // The fill under way with fill_during_forward (null: none); AwaitFill ends it.
  struct PendingFill;
  std::unique_ptr<PendingFill> pending_;
  void AwaitFill();
  class MaskPrecompute;
  std::unique_ptr<MaskPrecompute> precompute_;  // holds its own references to the grammars it computes
  // The vocabulary as the matchers see it, prepared on the first structured request.
  std::shared_ptr<const structured_output::TokenizerInfo> info_;
  std::optional<int32_t> think_start_id_, think_end_id_;  // set with a reasoning parser
  // Compiled grammars by their spec, the oldest evicted first past kMaxCachedGrammars:
  // a grammar's token mask cache fills as requests use it, so reuse pays.
  static constexpr size_t kMaxCachedGrammars = 64;
  std::unordered_map<std::string, std::shared_ptr<const structured_output::CompiledGrammar>> cache_;
  std::deque<std::string> cache_order_;
};

// Whitespace characters allowed between two JSON tokens (json, json_object) unless
// disable_any_whitespace: bounded, as llama.cpp's JSON grammars bound it (a space, or
// a newline and 20 characters of indentation), because a model that starts repeating
// whitespace in an unbounded gap would never get out (xgrammar's any_whitespace
// allows unbounded gaps; a known cause of endless JSON outputs in vLLM).
inline constexpr int32_t kMaxJsonWhitespace = 20;

// The grammar of a spec without a vocabulary (what MakeRequest compiles). Throws
// StructuredOutputError naming the construct.
structured_output::Grammar GrammarOfSpec(const StructuredOutputsParams& spec);

}  // namespace vllm
