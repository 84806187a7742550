#include "vllm/engine/structured_output_manager.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
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

// Worker threads first_worker .. threads - 1, waiting between jobs. first_worker 1:
// the caller is thread 0 (Run); 0: the job runs on the workers alone while the
// caller goes on (Start, then Wait).
class StructuredOutputManager::MaskFillPool {
 public:
  MaskFillPool(int threads, int first_worker) : first_worker_(first_worker) {
    for (int i = first_worker; i < threads; ++i) workers_.emplace_back([this, i] { Work(i); });
  }
  ~MaskFillPool() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    start_.notify_all();
  }  // workers_ join
  // Starts fn(t) on the workers t in [first_worker, n), n <= the pool's threads.
  void Start(int n, std::function<void(int)> fn) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      job_ = std::move(fn);
      job_threads_ = n;
      pending_ = n - first_worker_;
      ++generation_;
    }
    start_.notify_all();
  }
  // Returns when every call of the last Start has returned.
  void Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
  }
  // fn(t) for t in [0, n) with the caller as thread 0 (first_worker 1); returns when
  // every call has returned.
  void Run(int n, const std::function<void(int)>& fn) {
    Start(n, fn);
    fn(0);
    Wait();
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
        job = &job_;  // not replaced before pending_ reaches 0 (Start follows Wait)
      }
      (*job)(index);
      const std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_all();
    }
  }

  const int first_worker_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::function<void(int)> job_;
  int job_threads_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::jthread> workers_;  // last: joined before the members above go
};

// A fill running on the pool while the step's forward runs: what its threads write
// and read, kept alive until AwaitFill.
struct StructuredOutputManager::PendingFill {
  std::vector<so::GrammarMatcher*> rows;
  std::span<uint32_t> bitmask;  // the SchedulerOutput's words, sized before the start
  std::vector<std::exception_ptr> errors;
  std::chrono::steady_clock::time_point start;
  std::atomic<int64_t> finished_ns{0};  // steady_clock time of the last row written, by the last thread
  std::atomic<int> threads_left{0};
};

// Background threads that compute the mask cache of each newly compiled grammar
// (CompiledGrammar::PrecomputeMasks), oldest first, while the steps run. All of them
// work on the oldest grammar, splitting its positions: 64 requests of one JSON schema
// start together, and until a position's entry exists every row that reaches it
// waits for the one thread computing it. With one thread the H200's first round of
// bench/peer/gpu_compare.sh --structured waited 1.0 ms a step for the masks (step 22.9
// ms against 21.6 unconstrained).
class StructuredOutputManager::MaskPrecompute {
 public:
  explicit MaskPrecompute(int threads) {
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { Work(); });
  }
  ~MaskPrecompute() {
    stop_.store(true);
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      queued_.clear();
    }
    wake_.notify_all();
  }  // workers_ join
  void Add(std::shared_ptr<const so::CompiledGrammar> grammar) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      queued_.push_back(std::move(grammar));
    }
    wake_.notify_all();
  }

 private:
  void Work() {
    for (;;) {
      std::shared_ptr<const so::CompiledGrammar> grammar;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_.load() || !queued_.empty(); });
        if (stop_.load()) return;
        grammar = queued_.front();
      }
      if (grammar->PrecomputeMasks(&stop_) < 0) return;
      // Every position is claimed: the first worker back takes the grammar off.
      const std::lock_guard<std::mutex> lock(mutex_);
      if (!queued_.empty() && queued_.front() == grammar) queued_.pop_front();
    }
  }

  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<const so::CompiledGrammar>> queued_;
  std::vector<std::jthread> workers_;  // last: joined before the members above go
};

StructuredOutputManager::~StructuredOutputManager() {
  if (pending_ && fill_during_forward_) pool_->Wait();  // its threads write into pending_ (its errors are dropped)
}

StructuredOutputManager::StructuredOutputManager(const Tokenizer* tokenizer, std::vector<int32_t> eos_token_ids,
                                                 int32_t vocab_size, const std::string& reasoning_parser,
                                                 int mask_threads, bool precompute_masks, bool fill_during_forward)
    : tokenizer_(tokenizer), eos_token_ids_(std::move(eos_token_ids)), vocab_size_(vocab_size),
      mask_threads_(mask_threads), fill_during_forward_(fill_during_forward) {
  if (mask_threads < 1) {
    throw std::invalid_argument("StructuredOutputManager: mask_threads must be >= 1, got " +
                                std::to_string(mask_threads));
  }
  if (fill_during_forward) {
    pool_ = std::make_unique<MaskFillPool>(mask_threads, /*first_worker=*/0);
  } else if (mask_threads > 1) {
    pool_ = std::make_unique<MaskFillPool>(mask_threads, /*first_worker=*/1);
  }
  if (precompute_masks) precompute_ = std::make_unique<MaskPrecompute>(mask_threads);
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
  AwaitFill();
  output.structured_output_request_ids.clear();
  output.grammar_bitmask.clear();
  output.await_grammar_bitmask = nullptr;
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
  // The last step's words (RecycleBitmask), resized only when the row count changed:
  // a fresh 2 MB vector a step (64 rows of a 248k vocabulary) was zero-filled and
  // page-faulted in on the host before the forward could be queued. The fill writes
  // every word of its rows.
  if (output.grammar_bitmask.empty()) output.grammar_bitmask.swap(spare_bitmask_);
  output.grammar_bitmask.resize(rows.size() * words);
  pending_ = std::make_unique<PendingFill>();
  PendingFill& fill = *pending_;
  fill.start = std::chrono::steady_clock::now();
  fill.rows = std::move(rows);
  fill.bitmask = std::span<uint32_t>(output.grammar_bitmask);
  // Rows are independent (each matcher its own parse state; a grammar's mask cache
  // fills each position once under its once_flag), so threads take every n-th row.
  const size_t threads = std::min(static_cast<size_t>(mask_threads_), fill.rows.size());
  fill.errors.resize(threads);
  fill.threads_left.store(static_cast<int>(threads));
  std::function<void(int)> work = [&fill, threads, words](int t) {
    try {
      for (size_t i = t; i < fill.rows.size(); i += threads) {
        fill.rows[i]->FillNextTokenBitmask(fill.bitmask.subspan(i * words, words));
      }
    } catch (...) {
      fill.errors[t] = std::current_exception();
    }
    if (fill.threads_left.fetch_sub(1) == 1) {
      fill.finished_ns.store(std::chrono::steady_clock::now().time_since_epoch().count());
    }
  };
  if (fill_during_forward_) {
    pool_->Start(static_cast<int>(threads), std::move(work));
    output.await_grammar_bitmask = [this] { AwaitFill(); };
  } else if (threads == 1) {
    work(0);
  } else {
    pool_->Run(static_cast<int>(threads), work);
  }
  if (!fill_during_forward_) AwaitFill();
}

void StructuredOutputManager::RecycleBitmask(SchedulerOutput& output) {
  if (output.await_grammar_bitmask) output.await_grammar_bitmask();  // never while the fill writes it
  if (output.grammar_bitmask.capacity() > spare_bitmask_.capacity()) spare_bitmask_.swap(output.grammar_bitmask);
}

void StructuredOutputManager::AwaitFill() {
  if (!pending_) return;
  const auto wait_start = std::chrono::steady_clock::now();
  if (fill_during_forward_) pool_->Wait();
  const std::unique_ptr<PendingFill> fill = std::move(pending_);
  const auto finished = std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(fill->finished_ns.load()));
  ++stats_.num_bitmask_steps;
  stats_.num_bitmask_rows += static_cast<int64_t>(fill->rows.size());
  stats_.bitmask_seconds += std::chrono::duration<double>(finished - fill->start).count();
  // Synchronous, the step waited for the whole fill; overlapped, for what was left
  // of it when the runner asked.
  const auto waited_from = fill_during_forward_ ? std::max(wait_start, fill->start) : fill->start;
  stats_.bitmask_wait_seconds += std::max(0.0, std::chrono::duration<double>(finished - waited_from).count());
  for (const std::exception_ptr& error : fill->errors) {
    if (error) std::rethrow_exception(error);
  }
}

bool StructuredOutputManager::Advance(StructuredOutputRequest& request, const std::vector<int32_t>& new_token_ids,
                                      int64_t& accepted) const {
  auto first = new_token_ids.begin();
  if (!request.reasoning_ended) {
    first = std::find(new_token_ids.begin(), new_token_ids.end(), *think_end_id_);
    if (first == new_token_ids.end()) return true;
    request.reasoning_ended = true;
    ++first;
  }
  for (auto it = first; it != new_token_ids.end(); ++it) {
    if (request.matcher.IsTerminated() || !request.matcher.AcceptToken(*it)) return false;
    ++accepted;
  }
  return true;
}

bool StructuredOutputManager::AcceptTokens(StructuredOutputRequest& request, const std::vector<int32_t>& new_token_ids) {
  const auto start = std::chrono::steady_clock::now();
  const bool ok = Advance(request, new_token_ids, stats_.num_accepted_tokens);
  stats_.accept_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return ok;
}

std::vector<bool> StructuredOutputManager::AcceptTokensOfStep(const std::vector<AcceptItem>& items) {
  const size_t threads = pool_ ? std::min(static_cast<size_t>(mask_threads_), items.size() / kAcceptRowsPerThread) : 0;
  if (threads < 2) {
    std::vector<bool> ok;
    for (const auto& [request, tokens] : items) ok.push_back(AcceptTokens(*request, *tokens));
    return ok;
  }
  if (pending_) AwaitFill();  // the pool's threads are the fill's until then
  const auto start = std::chrono::steady_clock::now();
  std::vector<uint8_t> ok(items.size(), 0);           // bytes: threads write neighbours
  std::vector<int64_t> accepted(threads * 16, 0);     // a counter a thread, a cache line apart
  std::vector<std::exception_ptr> errors(threads);
  const std::function<void(int)> work = [&](int t) {
    try {
      for (size_t i = static_cast<size_t>(t); i < items.size(); i += threads) {
        ok[i] = Advance(*items[i].first, *items[i].second, accepted[static_cast<size_t>(t) * 16]) ? 1 : 0;
      }
    } catch (...) {
      errors[static_cast<size_t>(t)] = std::current_exception();
    }
  };
  if (fill_during_forward_) {  // the workers alone (first_worker 0)
    pool_->Start(static_cast<int>(threads), work);
    pool_->Wait();
  } else {
    pool_->Run(static_cast<int>(threads), work);
  }
  for (size_t t = 0; t < threads; ++t) stats_.num_accepted_tokens += accepted[t * 16];
  stats_.accept_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return {ok.begin(), ok.end()};
}

}  // namespace vllm
