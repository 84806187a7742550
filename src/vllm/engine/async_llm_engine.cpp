#include "vllm/engine/async_llm_engine.h"

#include <stdexcept>
#include <utility>

#include "vt/cpu_threads.h"

namespace vllm {
namespace {

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

FinishedRequestStats AsyncLLMEngine::LiveRequest::Finished(const std::string& id, std::string finish_reason,
                                                           Clock::time_point now) const {
  FinishedRequestStats f{.request_id = id,
                         .user = user,
                         .finish_reason = std::move(finish_reason),
                         .e2e_latency_s = Seconds(now - arrival),
                         .num_prompt_tokens = num_prompt_tokens,
                         .num_generation_tokens = num_generation_tokens};
  if (scheduled_time) {
    f.scheduled = true;
    f.queue_time_s = Seconds(*scheduled_time - arrival);
    f.inference_time_s = Seconds(now - *scheduled_time);
  }
  if (scheduled_time && first_token_time) {
    f.got_first_token = true;
    f.prefill_time_s = Seconds(*first_token_time - *scheduled_time);
    f.decode_time_s = Seconds(now - *first_token_time);
    f.time_to_first_token_s = Seconds(*first_token_time - arrival);
  }
  return f;
}

void OutputQueue::Push(StreamItem item) {
  {
    std::lock_guard lock(mutex_);
    items_.push_back(std::move(item));
  }
  ready_.notify_one();
}

std::optional<StreamItem> OutputQueue::Pop(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !items_.empty(); })) return std::nullopt;
  StreamItem item = std::move(items_.front());
  items_.pop_front();
  return item;
}

AsyncLLMEngine::AsyncLLMEngine(std::unique_ptr<LLMEngine> engine, StatLogger* stat_logger, int own_cpu_threads,
                               std::function<void(const std::string&)> on_engine_dead)
    : engine_(std::move(engine)),
      stat_logger_(stat_logger),
      own_cpu_threads_(own_cpu_threads),
      on_engine_dead_(std::move(on_engine_dead)),
      tokenizer_(engine_->has_tokenizer() ? &engine_->tokenizer() : nullptr),
      config_(engine_->config()),
      max_model_len_(engine_->stats().max_model_len),
      vocab_size_(engine_->model_config().vocab_size),
      stats_(engine_->stats()) {
  loop_ = std::thread([this] { Loop(); });
}

AsyncLLMEngine::~AsyncLLMEngine() { Shutdown(); }

void AsyncLLMEngine::Shutdown() {
  {
    std::lock_guard lock(inbox_mutex_);
    stopping_ = true;
  }
  inbox_ready_.notify_one();
  if (loop_.joinable()) loop_.join();
}

void AsyncLLMEngine::AddRequests(std::vector<NewRequest> requests, std::shared_ptr<OutputQueue> queue) {
  Submission submission{std::move(requests), std::move(queue), {}, Clock::now()};
  std::future<void> admitted = submission.admitted.get_future();
  {
    std::lock_guard lock(inbox_mutex_);
    if (dead_) throw EngineDeadError(*dead_);
    if (stopping_) throw std::runtime_error("the engine is shutting down");
    submissions_.push_back(&submission);
  }
  inbox_ready_.notify_one();
  admitted.get();  // rethrows the reason of a rejection
}

void AsyncLLMEngine::Abort(std::vector<std::string> request_ids) {
  {
    std::lock_guard lock(inbox_mutex_);
    for (std::string& id : request_ids) aborts_.push_back(std::move(id));
  }
  inbox_ready_.notify_one();
}

void AsyncLLMEngine::AbortAll() {
  {
    std::lock_guard lock(inbox_mutex_);
    abort_all_ = true;
  }
  inbox_ready_.notify_one();
}

EngineStats AsyncLLMEngine::stats() const {
  std::lock_guard lock(stats_mutex_);
  return stats_;
}

void AsyncLLMEngine::Loop() {
  if (own_cpu_threads_ > 0) vt::SetNumThreadsForThisThread(own_cpu_threads_);
  bool has_work = false;
  std::vector<Submission*> submissions;
  while (true) {
    std::vector<std::string> aborts;
    bool abort_all = false;
    {
      std::unique_lock lock(inbox_mutex_);
      inbox_ready_.wait(
          lock, [&] { return stopping_ || has_work || abort_all_ || !submissions_.empty() || !aborts_.empty(); });
      submissions.swap(submissions_);
      aborts.swap(aborts_);
      abort_all = std::exchange(abort_all_, false);
      if (stopping_) break;
    }
    IterationStats iteration;
    try {
      ProcessAborts(aborts, iteration);
      if (abort_all) AbortAllLive(iteration);
    } catch (const std::exception& e) {
      FailAll(std::string("the engine failed while aborting a request: ") + e.what(), iteration);
    }
    for (Submission* submission : submissions) Admit(*submission);
    submissions.clear();
    if (engine_->HasUnfinishedRequests()) StepOnce(iteration);
    has_work = engine_->HasUnfinishedRequests();
    PublishStats(iteration);
    Deliver();
  }
  for (Submission* submission : submissions) {
    submission->admitted.set_exception(std::make_exception_ptr(std::runtime_error("the engine is shutting down")));
  }
  IterationStats iteration;
  FailAll("the engine is shutting down", iteration);
  Deliver();
}

void AsyncLLMEngine::ProcessAborts(const std::vector<std::string>& request_ids, IterationStats& iteration) {
  const Clock::time_point now = Clock::now();
  for (const std::string& id : request_ids) {
    auto found = live_.find(id);
    if (found == live_.end()) continue;  // finished before the abort arrived
    engine_->AbortRequest(id);
    const LiveRequest& r = found->second;
    iteration.finished_requests.push_back(r.Finished(id, "abort", now));
    live_.erase(found);
  }
}

void AsyncLLMEngine::AbortAllLive(IterationStats& iteration) {
  std::vector<std::string> ids;
  for (const auto& [id, r] : live_) ids.push_back(id);
  for (const std::string& id : ids) {
    std::optional<RequestOutput> output = engine_->AbortRequest(id);
    if (output) {
      Dispatch(std::move(*output), iteration);  // finished: counted and handed to its queue
    } else {
      live_.erase(id);
    }
  }
}

void AsyncLLMEngine::Admit(Submission& submission) {
  std::vector<std::string> added;
  try {
    for (NewRequest& r : submission.requests) {
      const auto num_prompt_tokens = static_cast<int64_t>(r.prompt_token_ids.size());
      engine_->AddRequest(r.request_id, std::move(r.prompt_token_ids), r.params);
      added.push_back(r.request_id);
      live_[r.request_id] = {submission.queue, submission.arrival, std::nullopt, num_prompt_tokens, 0, r.user, {}, {}};
    }
  } catch (...) {
    // All or nothing: the requests admitted before the rejected one never run.
    for (const std::string& id : added) {
      engine_->AbortRequest(id);
      live_.erase(id);
    }
    submission.admitted.set_exception(std::current_exception());
    return;
  }
  submission.admitted.set_value();
}

void AsyncLLMEngine::StepOnce(IterationStats& iteration) {
  iteration.stepped = true;
  try {
    const Clock::time_point step_start = Clock::now();  // when the step's new requests were scheduled
    std::vector<RequestOutput> outputs = RunEngineStep(*engine_);
    for (const std::string& id : engine_->last_step_new_req_ids()) {
      if (auto found = live_.find(id); found != live_.end() && !found->second.scheduled_time) {
        found->second.scheduled_time = step_start;
      }
    }
    for (RequestOutput& output : outputs) Dispatch(std::move(output), iteration);
  } catch (const EngineDeadError& e) {
    const std::string why = std::string("the engine died: ") + e.what();
    FailAll(why, iteration);
    bool first = false;
    {
      std::lock_guard lock(inbox_mutex_);
      first = !dead_;
      if (first) dead_ = why;
    }
    if (first && on_engine_dead_) on_engine_dead_(why);
  } catch (const std::exception& e) {
    FailAll(std::string("the engine failed while running this request: ") + e.what(), iteration);
  }
}

void AsyncLLMEngine::Dispatch(RequestOutput output, IterationStats& iteration) {
  auto found = live_.find(output.request_id);
  if (found == live_.end()) return;
  LiveRequest& r = found->second;
  const Clock::time_point now = Clock::now();
  const auto num_new = static_cast<int64_t>(output.new_token_ids.size());
  if (num_new > 0) {
    if (!r.last_token_time) {
      r.first_token_time = now;
      iteration.time_to_first_tokens_s.push_back(Seconds(now - r.arrival));
      iteration.num_prompt_tokens += r.num_prompt_tokens;
    } else {
      iteration.inter_token_latencies_s.push_back(Seconds(now - *r.last_token_time));
    }
    r.last_token_time = now;
    r.num_generation_tokens += num_new;
    iteration.num_generation_tokens += num_new;
  }
  std::shared_ptr<OutputQueue> queue = r.queue;
  if (output.finished) {
    iteration.finished_requests.push_back(r.Finished(output.request_id, output.finish_reason, now));
    live_.erase(found);
  }
  outbox_.emplace_back(std::move(queue), StreamItem{std::move(output), std::nullopt});
}

void AsyncLLMEngine::FailAll(const std::string& error, IterationStats& iteration) {
  const Clock::time_point now = Clock::now();
  for (auto& [id, r] : live_) {
    try {
      engine_->AbortRequest(id);
    } catch (const std::exception&) {
      // The request is reported failed either way; its state is being torn down.
    }
    iteration.finished_requests.push_back(r.Finished(id, "error", now));
    StreamItem item;
    item.output.request_id = id;
    item.error = error;
    outbox_.emplace_back(r.queue, std::move(item));
  }
  live_.clear();
}

void AsyncLLMEngine::Deliver() {
  for (auto& [queue, item] : outbox_) queue->Push(std::move(item));
  outbox_.clear();
}

// The logger first: whatever stats() shows, the logger has recorded too.
void AsyncLLMEngine::PublishStats(const IterationStats& iteration) {
  EngineStats stats = engine_->stats();
  if (stat_logger_) stat_logger_->Record(stats, iteration);
  std::lock_guard lock(stats_mutex_);
  stats_ = stats;
}

}  // namespace vllm
