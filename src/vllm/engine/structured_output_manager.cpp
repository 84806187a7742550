#include "vllm/engine/structured_output_manager.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "vllm/structured_output/grammar_compiler.h"
#include "vllm/tokenizer/tokenizer.h"

namespace vllm {
namespace {

namespace so = structured_output;

// The cache key of a spec: its kind, then its text (choices joined by NUL bytes).
std::string KeyOf(const StructuredOutputsParams& spec) {
  const std::string ws = spec.disable_any_whitespace ? "compact:" : "any:";
  if (spec.json) return "json:" + ws + *spec.json;
  if (spec.json_object) return "json_object:" + ws;
  if (spec.regex) return "regex:" + *spec.regex;
  if (spec.grammar) return "grammar:" + *spec.grammar;
  if (spec.prebuilt) return "prebuilt:" + spec.prebuilt_key;
  std::string key = "choice:";
  for (const std::string& choice : *spec.choice) key += choice + '\0';
  return key;
}

}  // namespace

so::Grammar GrammarOfSpec(const StructuredOutputsParams& spec) {
  so::JsonSchemaOptions options;
  options.max_whitespace = spec.disable_any_whitespace ? 0 : kMaxJsonWhitespace;
  if (spec.json) return so::GrammarFromJsonSchema(std::string_view(*spec.json), options);
  if (spec.json_object) return so::GrammarFromJsonObject(options);
  if (spec.regex) return so::GrammarFromRegex(*spec.regex);
  if (spec.grammar) return so::GrammarFromGbnf(*spec.grammar);
  if (spec.prebuilt) return *spec.prebuilt;
  if (spec.choice) return so::GrammarFromChoices(*spec.choice);
  throw so::StructuredOutputError("structured_outputs: no constraint is set");
}

// Workers 1 .. n - 1 of Run, waiting between calls.
class StructuredOutputManager::MaskFillPool {
 public:
  explicit MaskFillPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { Work(i); });
  }
  ~MaskFillPool() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    start_.notify_all();
  }  // workers_ join
  // fn(t) for t in [0, n), n <= the pool's threads: t = 0 on the caller. Returns when
  // every call has returned.
  void Run(int n, const std::function<void(int)>& fn) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      job_ = &fn;
      job_threads_ = n;
      pending_ = n - 1;
      ++generation_;
    }
    start_.notify_all();
    fn(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
  }

 private:
  void Work(int index) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        start_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        if (index >= job_threads_) continue;
        job = job_;
      }
      (*job)(index);
      const std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* job_ = nullptr;
  int job_threads_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::jthread> workers_;  // last: joined before the members above go
};

// One background thread that computes the mask cache of each newly compiled grammar
// (CompiledGrammar::PrecomputeMasks), oldest first, while the steps run.
class StructuredOutputManager::MaskPrecompute {
 public:
  MaskPrecompute() : worker_([this] { Work(); }) {}
  ~MaskPrecompute() {
    stop_.store(true);
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      queued_.clear();
    }
    wake_.notify_all();
  }  // worker_ joins
  void Add(std::shared_ptr<const so::CompiledGrammar> grammar) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      queued_.push_back(std::move(grammar));
    }
    wake_.notify_one();
  }

 private:
  void Work() {
    for (;;) {
      std::shared_ptr<const so::CompiledGrammar> grammar;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_.load() || !queued_.empty(); });
        if (stop_.load()) return;
        grammar = std::move(queued_.front());
        queued_.pop_front();
      }
      if (!grammar->PrecomputeMasks(&stop_)) return;
    }
  }

  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<const so::CompiledGrammar>> queued_;
  std::jthread worker_;  // last: joined before the members above go
};

StructuredOutputManager::~StructuredOutputManager() = default;

StructuredOutputManager::StructuredOutputManager(const Tokenizer* tokenizer, std::vector<int32_t> eos_token_ids,
                                                 int32_t vocab_size, const std::string& reasoning_parser,
                                                 int mask_threads, bool precompute_masks)
    : tokenizer_(tokenizer), eos_token_ids_(std::move(eos_token_ids)), vocab_size_(vocab_size),
      mask_threads_(mask_threads) {
  if (mask_threads < 1) {
    throw std::invalid_argument("StructuredOutputManager: mask_threads must be >= 1, got " +
                                std::to_string(mask_threads));
  }
  if (mask_threads > 1) pool_ = std::make_unique<MaskFillPool>(mask_threads);
  if (precompute_masks) precompute_ = std::make_unique<MaskPrecompute>();
  if (reasoning_parser.empty()) return;
  if (tokenizer == nullptr) throw std::invalid_argument("--reasoning-parser needs a tokenizer, and the model has none");
  if (reasoning_parser != "qwen3") {
    throw std::invalid_argument("unknown reasoning parser '" + reasoning_parser + "' (known: qwen3)");
  }
  think_start_id_ = tokenizer->TokenToId("<think>");
  think_end_id_ = tokenizer->TokenToId("</think>");
  if (!think_start_id_ || !think_end_id_) {
    throw std::invalid_argument("--reasoning-parser qwen3 needs the tokens <think> and </think>, which the tokenizer (" +
                                tokenizer->source() + ") does not have");
  }
}

std::shared_ptr<const so::CompiledGrammar> StructuredOutputManager::Compile(const StructuredOutputsParams& spec) {
  const std::string key = KeyOf(spec);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  auto compiled = std::make_shared<const so::CompiledGrammar>(GrammarOfSpec(spec), info_);
  if (cache_.size() >= kMaxCachedGrammars) {
    cache_.erase(cache_order_.front());
    cache_order_.pop_front();
  }
  cache_.emplace(key, compiled);
  cache_order_.push_back(key);
  if (precompute_) precompute_->Add(compiled);
  return compiled;
}

// qwen3: the prompt leaves the model reasoning when its last <think> comes after its
// last </think> (Qwen3.5's template with thinking on ends the prompt with "<think>\n").
// Otherwise the output is content from its start, as the server's reasoning parser
// reads it when the output does not open with <think>.
bool StructuredOutputManager::OpensReasoning(const std::vector<int32_t>& prompt_token_ids) const {
  const auto last_start = std::find(prompt_token_ids.rbegin(), prompt_token_ids.rend(), *think_start_id_);
  const auto last_end = std::find(prompt_token_ids.rbegin(), prompt_token_ids.rend(), *think_end_id_);
  return last_start != prompt_token_ids.rend() && last_start < last_end;
}

std::shared_ptr<StructuredOutputRequest> StructuredOutputManager::MakeRequest(
    const SamplingParams& params, const std::vector<int32_t>& prompt_token_ids) {
  if (tokenizer_ == nullptr) {
    throw so::StructuredOutputError("structured outputs need a tokenizer, and the model has none");
  }
  if (!info_) info_ = so::TokenizerInfo::FromTokenizer(*tokenizer_, eos_token_ids_, vocab_size_);
  auto request = std::make_shared<StructuredOutputRequest>(Compile(*params.structured_outputs));
  if (think_end_id_) request->reasoning_ended = !OpensReasoning(prompt_token_ids);
  return request;
}

void StructuredOutputManager::FillBitmask(SchedulerOutput& output, const Scheduler& scheduler) {
  output.structured_output_request_ids.clear();
  output.grammar_bitmask.clear();
  if (!info_) return;
  output.grammar_bitmask_words = info_->bitmask_words();
  const size_t words = static_cast<size_t>(info_->bitmask_words());
  std::vector<so::GrammarMatcher*> rows;  // row i's matcher
  for (const auto& [req_id, num_scheduled] : output.num_scheduled_tokens) {
    const Request* r = scheduler.get_request(req_id);
    if (r == nullptr || !r->structured_output_request || !r->structured_output_request->reasoning_ended) continue;
    if (r->num_computed_tokens + num_scheduled != r->num_tokens()) continue;  // a prompt chunk: nothing sampled
    output.structured_output_request_ids.emplace(req_id, static_cast<int32_t>(rows.size()));
    rows.push_back(&r->structured_output_request->matcher);
  }
  if (rows.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  output.grammar_bitmask.resize(rows.size() * words);
  const std::span<uint32_t> bitmask(output.grammar_bitmask);
  // Rows are independent (each matcher its own parse state; a grammar's mask cache
  // fills each position once under its once_flag), so threads take every n-th row.
  const size_t threads = std::min(static_cast<size_t>(mask_threads_), rows.size());
  std::vector<std::exception_ptr> errors(threads);
  const std::function<void(int)> fill = [&](int t) {
    try {
      for (size_t i = t; i < rows.size(); i += threads) rows[i]->FillNextTokenBitmask(bitmask.subspan(i * words, words));
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  if (threads == 1) {
    fill(0);
  } else {
    pool_->Run(static_cast<int>(threads), fill);
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  ++stats_.num_bitmask_steps;
  stats_.num_bitmask_rows += static_cast<int64_t>(rows.size());
  stats_.bitmask_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool StructuredOutputManager::AcceptTokens(StructuredOutputRequest& request, const std::vector<int32_t>& new_token_ids) {
  auto first = new_token_ids.begin();
  if (!request.reasoning_ended) {
    first = std::find(new_token_ids.begin(), new_token_ids.end(), *think_end_id_);
    if (first == new_token_ids.end()) return true;
    request.reasoning_ended = true;
    ++first;
  }
  for (auto it = first; it != new_token_ids.end(); ++it) {
    if (request.matcher.IsTerminated() || !request.matcher.AcceptToken(*it)) return false;
  }
  return true;
}

}  // namespace vllm
