// AsyncLLMEngine: the LLMEngine driven by a thread of its own, for the server.
//
//   HTTP threads                         engine loop thread (owns the LLMEngine)
//   ------------                         ---------------------------------------
//   AddRequests(reqs, queue) --inbox-->  AddRequest each (admission), wakes AddRequests
//   Abort(ids)               --inbox-->  AbortRequest each (pages and state slot freed)
//   queue->Pop()  <--- per-request OutputQueue ---  Step() outputs, one item per output
//
// The loop steps while the engine has unfinished requests and sleeps on a condition
// variable otherwise. An exception inside a step fails the requests then in flight
// (each gets an error item) and leaves the loop and later requests running.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vllm/engine/llm_engine.h"

namespace vllm {

// One item of a request's output stream: an output of the engine, or the error that
// ended the request (then `output` holds only request_id).
struct StreamItem {
  RequestOutput output;
  std::optional<std::string> error;
};

// A thread-safe queue drained by one consumer (an HTTP handler). The requests of one
// HTTP request (a batch of prompts) share one queue; items carry their request_id.
class OutputQueue {
 public:
  void Push(StreamItem item);
  // The next item, or nullopt when none arrived within `timeout`.
  std::optional<StreamItem> Pop(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamItem> items_;
};

// vLLM v1's per-iteration statistics, handed to a StatLogger after every loop turn.
struct FinishedRequestStats {
  std::string request_id;
  std::string user;           // NewRequest::user
  std::string finish_reason;  // "stop", "length", "abort" or "error"
  double e2e_latency_s = 0;   // arrival to finish
  int64_t num_prompt_tokens = 0;
  int64_t num_generation_tokens = 0;
  // vLLM's phases; a phase the request never reached is 0 (and `reached` says which).
  double queue_time_s = 0;      // arrival to first scheduled
  double prefill_time_s = 0;    // first scheduled to first token
  double decode_time_s = 0;     // first token to finish
  double inference_time_s = 0;  // first scheduled to finish
  double time_to_first_token_s = 0;
  bool scheduled = false;       // the queue time is known
  bool got_first_token = false;  // the prefill and decode times are known
};

struct IterationStats {
  int64_t num_prompt_tokens = 0;      // prompts of the requests that got their first token
  int64_t num_generation_tokens = 0;  // tokens generated in this iteration
  std::vector<double> time_to_first_tokens_s;
  std::vector<double> inter_token_latencies_s;
  std::vector<FinishedRequestStats> finished_requests;
  bool stepped = false;  // an engine step ran in this iteration (vLLM's iteration_tokens)
};

// Receives the statistics on the engine thread; implementations must be thread-safe
// towards their own readers (e.g. a /metrics handler).
class StatLogger {
 public:
  virtual ~StatLogger() = default;
  virtual void Record(const EngineStats& scheduler_stats, const IterationStats& iteration_stats) = 0;
};

// vLLM's EngineClient: what the OpenAI server asks of the engine, whether one engine
// loop (AsyncLLMEngine) or data-parallel replicas behind a load balancer
// (DataParallelEngine, data_parallel_engine.h). Every method is safe from any thread.
class EngineClient {
 public:
  struct NewRequest {
    std::string request_id;
    std::vector<int32_t> prompt_token_ids;
    SamplingParams params;
    std::string user = {};  // the client's "user" field: shown in the request's log line
  };

  virtual ~EngineClient() = default;
  // Hands `requests` to an engine loop and waits until it has admitted them; their
  // outputs go to `queue`. Rethrows the engine's exception (std::invalid_argument for a
  // bad request) when one is rejected; then none of them runs.
  virtual void AddRequests(std::vector<NewRequest> requests, std::shared_ptr<OutputQueue> queue) = 0;
  // Aborts requests (unknown or finished ids are ignored); returns at once. Their
  // queues get nothing more: the client that would read them is gone.
  virtual void Abort(std::vector<std::string> request_ids) = 0;
  // Ends every request in flight now; each queue gets its request's final output with
  // finish_reason "abort" (the server's shutdown after its timeout). Returns at once.
  virtual void AbortAll() = 0;

  // Set at construction and never changed.
  virtual const Tokenizer* tokenizer() const = 0;
  virtual const EngineConfig& config() const = 0;
  virtual int64_t max_model_len() const = 0;
  virtual int64_t vocab_size() const = 0;
  // The scheduler's state after the loop's last turn (the StatLogger has recorded that
  // turn already); over every replica. Outputs reach their queues after the turn's
  // statistics.
  virtual EngineStats stats() const = 0;

  // Stops the loops (idempotent); requests still in flight get an error item and later
  // AddRequests calls throw.
  virtual void Shutdown() = 0;
};

class AsyncLLMEngine : public EngineClient {
 public:
  // Starts the loop thread. `stat_logger` (may be null) must outlive this object. With
  // `own_cpu_threads` > 0 the loop runs the engine's CPU kernels on a thread pool of
  // its own of that size (vt::SetNumThreadsForThisThread), as data-parallel replicas
  // in one process do; 0: the process's pool.
  // `on_engine_dead` (may be empty) is called once, on the loop thread, when a step
  // throws EngineDeadError: the requests in flight then fail with its message, and
  // later AddRequests calls throw it.
  explicit AsyncLLMEngine(std::unique_ptr<LLMEngine> engine, StatLogger* stat_logger = nullptr,
                          int own_cpu_threads = 0,
                          std::function<void(const std::string&)> on_engine_dead = {});
  // Shutdown().
  ~AsyncLLMEngine() override;
  AsyncLLMEngine(const AsyncLLMEngine&) = delete;
  AsyncLLMEngine& operator=(const AsyncLLMEngine&) = delete;

  void AddRequests(std::vector<NewRequest> requests, std::shared_ptr<OutputQueue> queue) override;
  void Abort(std::vector<std::string> request_ids) override;
  void AbortAll() override;
  const Tokenizer* tokenizer() const override { return tokenizer_; }
  const EngineConfig& config() const override { return config_; }
  int64_t max_model_len() const override { return max_model_len_; }
  int64_t vocab_size() const override { return vocab_size_; }
  EngineStats stats() const override;
  void Shutdown() override;

 protected:
  // One engine step, on the loop thread. Virtual so that tests can make steps fail; a
  // subclass that overrides it calls Shutdown() in its destructor.
  virtual std::vector<RequestOutput> RunEngineStep(LLMEngine& engine) { return engine.Step(); }

 private:
  using Clock = std::chrono::steady_clock;
  // Lives on the submitting thread's stack until the loop has answered `admitted`.
  struct Submission {
    std::vector<NewRequest> requests;
    std::shared_ptr<OutputQueue> queue;
    std::promise<void> admitted;
    Clock::time_point arrival;
  };
  struct LiveRequest {
    std::shared_ptr<OutputQueue> queue;
    Clock::time_point arrival;
    std::optional<Clock::time_point> last_token_time;
    int64_t num_prompt_tokens = 0;
    int64_t num_generation_tokens = 0;
    std::string user;
    std::optional<Clock::time_point> scheduled_time;
    std::optional<Clock::time_point> first_token_time;

    // The statistics of request `id` when it finishes at `now`.
    FinishedRequestStats Finished(const std::string& id, std::string finish_reason, Clock::time_point now) const;
  };

  void Loop();
  void ProcessAborts(const std::vector<std::string>& request_ids, IterationStats& iteration);
  void AbortAllLive(IterationStats& iteration);
  void Admit(Submission& submission);
  void StepOnce(IterationStats& iteration);
  void Dispatch(RequestOutput output, IterationStats& iteration);
  void FailAll(const std::string& error, IterationStats& iteration);
  void PublishStats(const IterationStats& iteration);
  // Hands the turn's items to their queues, after PublishStats: a consumer that sees
  // its request finish also sees it counted in stats() and by the StatLogger.
  void Deliver();

  std::unique_ptr<LLMEngine> engine_;
  StatLogger* stat_logger_;
  int own_cpu_threads_;
  std::function<void(const std::string&)> on_engine_dead_;
  const Tokenizer* tokenizer_;
  EngineConfig config_;
  int64_t max_model_len_;
  int64_t vocab_size_;

  mutable std::mutex inbox_mutex_;
  std::condition_variable inbox_ready_;
  std::vector<Submission*> submissions_;  // guarded by inbox_mutex_
  std::vector<std::string> aborts_;       // guarded by inbox_mutex_
  bool abort_all_ = false;                // guarded by inbox_mutex_
  bool stopping_ = false;                 // guarded by inbox_mutex_
  std::optional<std::string> dead_;       // EngineDeadError's message; guarded by inbox_mutex_

  mutable std::mutex stats_mutex_;
  EngineStats stats_;  // guarded by stats_mutex_

  std::unordered_map<std::string, LiveRequest> live_;                        // the loop thread's alone
  std::vector<std::pair<std::shared_ptr<OutputQueue>, StreamItem>> outbox_;  // the loop thread's alone
  std::thread loop_;
};

}  // namespace vllm
