// The model runner: SchedulerOutput -> its own per-request state -> batch
// metadata -> ModelRegistry::Forward -> sampler. It owns the caches and the
// state of every request it has been sent (input_batch.h): each step first
// frees the finished requests, adds the new ones and applies the cached ones'
// deltas (vLLM's _update_states), then runs the step's InputBatch.
//
// One step is two phases, as in vLLM v1: ExecuteModel (state update, state
// resets, batch, forward; returns the step's logits) and SampleTokens (sampler and
// prompt logprobs from those logits). Execute runs both, or the forward and a
// greedy argmax on the device when that is all the step's requests need.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "vllm/core/scheduler_output.h"
#include "vllm/model_executor/forward_batch.h"
#include "vllm/model_executor/model.h"
#include "vllm/sample/sampler.h"
#include "vllm/spec_decode/draft_policy.h"
#include "vllm/spec_decode/mtp_proposer.h"
#include "vllm/worker/decode_graphs.h"
#include "vllm/worker/input_batch.h"
#include "vt/host_upload.h"

namespace vllm {

// Prompt logprobs computed in one step for one request: entries[i] scores prompt
// token first_position + i (given the tokens before it); the top-K plus that token.
struct PromptLogprobsChunk {
  int64_t first_position = 1;
  std::vector<TokenLogprobs> entries;
};

struct RunnerOutput {
  std::unordered_map<std::string, SampleResult> sampled;  // requests that sampled this step, without drafts
  std::unordered_map<std::string, PromptLogprobsChunk> prompt_logprobs;
  // Speculative decoding: requests that verified drafts get their accepted drafts
  // and then the token sampled after them (1 + accepted entries) here instead of in
  // `sampled`; draft_token_ids are the drafts proposed for their next steps.
  std::unordered_map<std::string, std::vector<SampleResult>> verified;
  std::unordered_map<std::string, std::vector<int32_t>> draft_token_ids;
};

// Speculative decoding in the runner (spec_decode/mtp_proposer.h).
struct SpeculativeDecoding {
  std::unique_ptr<MtpProposer> proposer;
  // State slots [backup_slot_base, backup_slot_base + num_backup_slots) hold the
  // states of requests verifying drafts from before the step (the GDN rollback).
  int32_t backup_slot_base = 0;
  int32_t num_backup_slots = 0;
  // Drafting stops while more requests than this are running (vLLM's
  // disable_by_batch_size); 0: never; unset: DraftPolicy measures when it pays.
  std::optional<int64_t> disable_by_batch_size;
};

// Which logits rows one scheduled request got: rows [first_row, first_row + num_rows)
// hold the logits computed at positions [first_position, first_position + num_rows)
// (each row predicts the token after its position). num_rows is q_len when the
// request wants prompt logprobs for this chunk, 1 when it only samples, else 0.
struct LogitsRows {
  int64_t first_row = 0;
  int64_t num_rows = 0;
  int64_t first_position = 0;
};

// Token bitmask rows of the requests with a grammar: a SchedulerOutput's, read in
// place (the output must outlive this view). Which request has which row is known
// when the step starts; the words may still be filling on the structured-output
// manager's threads while the forward runs (SchedulerOutput::await_grammar_bitmask):
// Row() waits for them, so the runner asks only once it has queued the forward.
class GrammarBitmask {
 public:
  GrammarBitmask() = default;
  explicit GrammarBitmask(const SchedulerOutput& output) : output_(&output) {}
  // req_id's row, -1 when it has none.
  int32_t RowOf(const std::string& req_id) const;
  bool empty() const { return output_ == nullptr || output_->structured_output_request_ids.empty(); }
  int64_t words_per_row() const { return output_ ? output_->grammar_bitmask_words : 0; }
  // The words of `row` ([words_per_row] uint32, token_bitmask layout); waits for the fill.
  std::span<const uint32_t> Row(int32_t row) const;

 private:
  const SchedulerOutput* output_ = nullptr;
};

struct StepLogits {
  InputBatch batch;              // the step's requests, valid until the runner's next step
  vt::Tensor logits;             // [N, vocab] f32 on the CPU
  std::vector<LogitsRows> rows;  // one per batch.requests entry, same order
  GrammarBitmask grammar;        // applied to the sampled rows before the sampler (a view of the step's output)
};

class ModelRunner {
 public:
  // With `decode_graphs`, plain-greedy decode batches run as device graphs
  // (decode_graphs.h); the model's device must support them.
  // With `speculative`, every step runs eagerly through its proposer's trunk (the
  // model must be that DecoderModel), verifies the scheduled drafts and proposes the
  // next ones (RunnerOutput::verified, draft_token_ids).
  ModelRunner(const Model& model, ModelCaches caches, int64_t block_size, uint64_t seed,
              std::optional<DecodeGraphOptions> decode_graphs = std::nullopt,
              std::optional<SpeculativeDecoding> speculative = std::nullopt);
  ModelRunner(const ModelRunner&) = delete;  // the decode graphs hold the caches' addresses
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Both phases of one step. When every sampling request is plain greedy
  // (Sampler::IsPlainGreedy) and none scores its prompt, the tokens are one
  // vt::Argmax over the logits on the model's device and only they are copied
  // back (a GPU then never sends the [N, vocab] logits to the host). On a GPU the
  // other requests that Sampler::SamplesOnDevice are drawn by vt::Sample there too
  // (ExecuteWithDeviceSampler), and decode batches of such requests (grammars
  // included) replay decode graphs. Grammar bitmasks are read only after the
  // forward is queued (a GPU runs it meanwhile). An output that schedules nothing
  // still frees its finished requests.
  RunnerOutput Execute(const SchedulerOutput& output);
  // Updates the states, zeroes the state slots of new sequences, builds the batch
  // and runs the model.
  StepLogits ExecuteModel(const SchedulerOutput& output);
  // Samples (and scores prompt tokens) from ExecuteModel's logits (the
  // SchedulerOutput given to ExecuteModel must still be alive). A request with a
  // row in logits.grammar samples from its logits masked by it (tokens outside the
  // grammar at -inf; the other requests' rows are untouched). Requests b with
  // (*sampled_elsewhere)[b] only get their prompt logprobs here.
  RunnerOutput SampleTokens(const StepLogits& logits, const std::vector<bool>* sampled_elsewhere = nullptr);
  // Captures the decode graphs of every batch shape (decode_graphs.h); the engine
  // calls it once at start-up. nullopt without decode graphs.
  std::optional<DecodeGraphs::CaptureSummary> CaptureDecodeGraphs();

  // Applies the output to the per-request states (finished ids freed first, then
  // new requests added, then the cached requests' deltas) and returns the step's
  // batch, valid until the next update. Throws std::logic_error when the output
  // does not fit the states (an unknown cached request, a duplicate new one, a
  // chunk beyond the known tokens). Public for tests and benchmarks.
  InputBatch UpdateStates(const SchedulerOutput& output);
  // Builds the batch (host metadata uploaded to the model's device); public for tests.
  ForwardBatch PrepareBatch(const InputBatch& batch) const;
  // The logits rows each scheduled request gets (PrepareBatch's logits_indices order).
  static std::vector<LogitsRows> PlanLogitsRows(const InputBatch& batch);
  // The runner's state of a request, nullptr when it holds none.
  const CachedRequestState* request_state(const std::string& req_id) const;
  int64_t num_request_states() const { return static_cast<int64_t>(requests_.size()); }
  const ModelCaches& caches() const { return caches_; }
  // Tokens the model has computed (forwarded) since construction: prefix-cache hits
  // are not among them.
  int64_t num_tokens_computed() const { return num_tokens_computed_; }

 private:
  void AddNewRequest(const NewRequestData& data);
  void ApplyCachedRequest(const CachedRequestData& data);
  StepLogits RunModel(InputBatch batch, const SchedulerOutput& output);
  // Zeroes the state slots of new sequences, or fills them from their prefix hit's
  // snapshot (batch.state_snapshot_loads).
  void ResetStateSlots(const InputBatch& batch) const;
  // After the forward: batch.state_snapshot_saves.
  void SaveStateSnapshots(const InputBatch& batch) const;
  // Every GDN layer's conv and SSM state from[from_index] -> to[to_index] (vt::Copy,
  // on the caches' device).
  void CopyStates(const std::vector<LayerGdnState>& from, int32_t from_index, const std::vector<LayerGdnState>& to,
                  int32_t to_index) const;
  // State resets, batch and forward: the step's [N, vocab] f32 logits on the model's device.
  vt::Tensor Forward(const InputBatch& batch, const std::vector<LogitsRows>& rows);
  static bool SamplesByArgmaxOnly(const InputBatch& batch);
  // Argmax only, some rows under a grammar's bitmask (Sampler::IsGreedyUnderGrammarOnly).
  static bool SamplesByMaskedArgmax(const InputBatch& batch);
  // Speculative steps (model_runner_spec.cpp): the forward with the GDN states of
  // requests verifying drafts backed up, the sampling / verification, the rollback of
  // partly accepted requests, then the drafts.
  RunnerOutput ExecuteSpeculative(InputBatch batch, const SchedulerOutput& output);
  void BackUpVerifyingStates(const InputBatch& batch) const;
  void RollBackRejectedDrafts(const InputBatch& batch, const std::vector<std::vector<int32_t>>& produced);
  // The tokens each request got (accepted drafts then the sampled one), batch order.
  static std::vector<std::vector<int32_t>> ProducedTokens(const InputBatch& batch, const RunnerOutput& output);
  // The verified tokens of a request with drafts from its per-row argmax tokens.
  static std::vector<SampleResult> AcceptGreedy(const BatchRequest& s, const int64_t* row_tokens);
  std::vector<SampleResult> Verify(const BatchRequest& s, const float* rows, int64_t vocab);
  // The device argmax of every sampling row; with `grammar`, the rows of the requests
  // it has a bitmask row for take only the tokens that row allows.
  RunnerOutput ExecuteGreedy(const InputBatch& batch, const GrammarBitmask* grammar = nullptr);
  // nullopt when the batch's graph could not be captured (the step then runs eagerly).
  // The graph's logits are sampled by vt::Sample, the grammar's rows as its bitmask.
  std::optional<RunnerOutput> ExecuteGraph(const InputBatch& batch, const GrammarBitmask& grammar);
  // The rows of one vt::Sample: params[n] for row n; penalized[n], where not null, the
  // request whose penalties vt::Penalties applies to row n first; logprobs[n] the k
  // of row n's vt::TopLogprobs (-1: none). Empty penalized / logprobs: none at all.
  struct DeviceDrawRows {
    // n rows, each greedy with nothing else until Set (a row no request samples from).
    explicit DeviceDrawRows(int64_t n)
        : params(static_cast<size_t>(n), vt::SampleRow{.temperature = 0.0f}),
          penalized(static_cast<size_t>(n), nullptr),
          logprobs(static_cast<size_t>(n), -1),
          biased(static_cast<size_t>(n), nullptr) {}
    // Row n draws request r's token with `sample` (Sampler::DeviceSampleRow).
    void Set(int64_t n, const Request& r, const vt::SampleRow& sample);
    std::vector<vt::SampleRow> params;
    std::vector<const Request*> penalized;
    std::vector<int> logprobs;
    std::vector<const Request*> biased;  // row n's logit_bias is added first (null: none)
  };
  // What a draw brings back: every row's token and, when a row asked for logprobs,
  // vt::TopLogprobs' ids and values [N, columns] (column 0 the token).
  struct DeviceDraws {
    std::vector<int64_t> tokens;
    int64_t columns = 0;
    std::vector<int64_t> logprob_ids;
    std::vector<float> logprob_values;
    // Row n's logprobs as the host sampler gives them, k of them (Sampler::LogprobsFromDeviceRow).
    TokenLogprobs Logprobs(int64_t row, int k) const;
  };
  // The bitmask rows of a draw (undefined: all ones): `sample` for vt::Sample, the
  // grammar's rows with each request's allowed_token_ids, bad words and min_tokens
  // masks cleared (Sampler::ApplyDeviceMask); `logprobs` for vt::TopLogprobs, the
  // grammar's rows alone (the host sampler's logprobs see the grammar's mask, not the
  // processors').
  struct DrawMasks {
    vt::Tensor sample, logprobs;
  };
  DrawMasks DrawMasksFor(const InputBatch& batch, const GrammarBitmask& grammar, int64_t num_rows,
                         const std::function<int64_t(size_t)>& row_of, vt::Device device);
  // vt::Sample of `logits` [N, V] on their device under masks.sample; penalties first
  // (in place: the logits are this step's own), the logprobs from the logits as they
  // were before the penalties (vLLM's raw logprobs) under masks.logprobs.
  DeviceDraws DrawOnDevice(const vt::Tensor& logits, const DeviceDrawRows& rows, const DrawMasks& masks);
  // vt::Penalties on the rows of `penalized` (see DrawOnDevice); nothing when all are null.
  void PenalizeOnDevice(const vt::Tensor& logits, const std::vector<const Request*>& penalized);
  // Adds each request's logit_bias row (Sampler::DeviceBiasRow) to its row of `logits`
  // (vt::Add, a [V] upload a biased row); nothing when all are null.
  void BiasOnDevice(const vt::Tensor& logits, const std::vector<const Request*>& biased);
  // Every sampling request drawn by vt::Sample (a decode graph's sampler; a grammar
  // as its bitmask), no drafts, no prompt logprobs.
  static bool SamplesOnDeviceOnly(const InputBatch& batch);
  // The forward, then vt::Sample on the model's device for the requests that
  // Sampler::SamplesOnDevice (grammar rows masked there); the logits go to the host
  // only for the others and for prompt logprobs (SampleTokens).
  RunnerOutput ExecuteWithDeviceSampler(InputBatch batch, const GrammarBitmask& grammar);
  // Bitmask words [num_rows, words] i32 on `device`: all ones but row row_of(b) of each
  // request b the grammar has a row for (row_of gives -1: none); undefined when no
  // request has one. Waits for the grammar's fill (GrammarBitmask::Row); the upload
  // is queued (grammar_upload_), not waited for.
  vt::Tensor GrammarRows(const InputBatch& batch, const GrammarBitmask& grammar, int64_t num_rows,
                         const std::function<int64_t(size_t)>& row_of, vt::Device device);
  // GrammarRows' rows (as wide as the grammar's or the [V] logits, whichever is wider),
  // with request_masks also each sampling request's own masks
  // (Sampler::ApplyDeviceMask), staged in `upload`; undefined when all are ones.
  vt::Tensor BitmaskRows(const InputBatch& batch, const GrammarBitmask& grammar, int64_t num_rows, int64_t vocab,
                         const std::function<int64_t(size_t)>& row_of, bool request_masks,
                         std::unique_ptr<vt::HostUpload>& upload, vt::Device device);
  // Request b's last logits row (-1 when it has none), for GrammarRows' row_of.
  static std::function<int64_t(size_t)> LastRowOf(const std::vector<LogitsRows>& rows);
  // [N, words] i32 on the logits' device: all ones but the last row of each request
  // `grammar` has a bitmask row for; undefined when there is none.
  vt::Tensor GrammarRowsOnDevice(const InputBatch& batch, const std::vector<LogitsRows>& rows,
                                 const GrammarBitmask* grammar, const vt::Tensor& logits);
  // The upload of a step's grammar rows or sampling parameters, queued after the
  // forward without waiting for it (a plain copy would hold the host until the forward
  // ends, then leave the device idle while the rows and the sampler's launches go out).
  vt::HostUpload& UploadFor(std::unique_ptr<vt::HostUpload>& upload, vt::Device device);
  // PrepareBatch with the logits rows already planned (PlanLogitsRows(batch)).
  ForwardBatch PrepareBatch(const InputBatch& batch, const std::vector<LogitsRows>& plan) const;

  const Model& model_;
  ModelCaches caches_;
  int64_t block_size_;
  Sampler sampler_;
  std::unique_ptr<DecodeGraphs> decode_graphs_;  // null: every step runs eagerly
  std::unique_ptr<vt::HostUpload> grammar_upload_, sample_params_upload_;  // made on first use
  std::unique_ptr<vt::HostUpload> sample_mask_upload_, bias_upload_;
  std::unique_ptr<vt::HostUpload> penalty_ids_upload_, penalty_params_upload_;
  std::optional<SpeculativeDecoding> speculative_;
  DraftPolicy draft_policy_;  // when speculative_ has no disable_by_batch_size
  // Node-based: a step's InputBatch points at these entries.
  std::unordered_map<std::string, CachedRequestState> requests_;
  int64_t num_tokens_computed_ = 0;
};

}  // namespace vllm
