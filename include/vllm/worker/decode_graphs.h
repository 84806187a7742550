// Decode steps replayed as device graphs (vLLM's CUDA graphs; `--enforce-eager`
// turns them off). A batch-1 decode of a 9B model is ~550 kernels of a few
// microseconds each: launched one by one from the host, the gaps between them
// cost a large part of the step. A graph replays them with one launch.
//
// A graph is captured per padded shape, on first use: the batch padded to the next
// power of two (at most max_batch) and the longest sequence rounded up to a bucket
// (powers of two from 512, at most max_model_len), because kernel choices and
// launch sizes taken at capture (the attention's split over the context, the
// block table's width) are fixed in the graph. Every graph reads its inputs from
// one device buffer of its own, rewritten by one host copy before each replay
// (PackInputs gives its layout), and writes the token vt::Sample draws for every
// row from the row's sampling parameters, which are among those inputs (a greedy
// row has temperature 0), so greedy and sampled batches replay the same graph.
// Batches under grammars (structured outputs) replay graphs of their own that also
// read a bitmask buffer, rewritten before each replay like the inputs.
//
// Padding rows are harmless: token 0 at position 0, its K/V written to slot 0 of
// the null block 0 (never given to a request), a context of that one token, and
// the recurrent state of `padding_state_slot`, a slot the scheduler never hands
// out. Their tokens are dropped.
//
// Before a shape's capture, the forward runs once eagerly on an all-padding batch
// (first-use work such as library handles must not happen while recording, and
// that run touches no request's state). All graphs share one GraphMemory: they
// replay on the device's one queue, never at the same time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "vllm/model_executor/forward_batch.h"
#include "vllm/model_executor/model.h"
#include "vllm/worker/input_batch.h"
#include "vt/device_graph.h"
#include "vt/op_args.h"

namespace vllm {

struct DecodeGraphOptions {
  int64_t max_batch = 0;             // largest batch run as a graph
  int64_t max_model_len = 0;         // longest sequence the engine admits
  int32_t padding_state_slot = -1;   // a recurrent-state slot no request uses (models with GDN layers)
};

// The shape a graph is captured for.
struct DecodeGraphShape {
  int64_t batch = 0;        // P: rows, a power of two >= the real batch
  int64_t max_seq_len = 0;  // S: the attention's context bound
  int64_t table_width = 0;  // W = ceil(S / block_size): block-table entries per row
  int64_t mask_words = 0;   // grammar bitmask words a row (a second input, [P, words] i32); 0: none
  auto operator<=>(const DecodeGraphShape&) const = default;
};

class DecodeGraphs {
 public:
  DecodeGraphs(const Model& model, const ModelCaches& caches, int64_t block_size, DecodeGraphOptions options);

  // Whether `batch` can run as a graph: only decodes of running sequences (one
  // token each, all sampling), at most max_batch of them, contexts within max_model_len.
  bool Accepts(const InputBatch& batch) const;
  // The token of every scheduled request, in order, drawn by vt::Sample with
  // sample_rows[r] (one per request); captures the graph of the batch's shape first
  // if it is new. nullopt when that capture failed (out of device memory, say): the
  // shape is then remembered as eager-only, the reason kept in last_capture_error(),
  // and the caller runs the step eagerly.
  // With `mask_rows` ([B, mask_words] bitmask words, vt::Sample's `allowed`: a
  // grammar's rows, all ones for requests without one), the graph of the masked shape.
  std::optional<std::vector<int32_t>> Run(const InputBatch& batch, const std::vector<vt::SampleRow>& sample_rows,
                                          const std::vector<int32_t>* mask_rows = nullptr, int64_t mask_words = 0);
  size_t num_graphs() const { return graphs_.size(); }
  const std::string& last_capture_error() const { return last_capture_error_; }

  DecodeGraphShape ShapeFor(const InputBatch& batch, int64_t mask_words = 0) const;
  // The input buffer of `shape` for `batch` (nullptr: every row padding) and its
  // sampling rows (one per request; padding rows greedy), int32:
  //   input_ids [P] | logits_rows [P] | positions [P] | slot_mapping [P] |
  //   seq_lens [P] | query_start_loc [P + 1] | state_slots [P] | block_tables [P, W] |
  //   sample_rows [P, vt::kSampleRowWords]
  std::vector<int32_t> PackInputs(const InputBatch* batch, const DecodeGraphShape& shape,
                                  const std::vector<vt::SampleRow>& sample_rows) const;

 private:
  struct Graph {
    vt::Tensor inputs;  // [PackInputs' length] i32 on the device
    ForwardBatch batch;  // views of `inputs`
    vt::Tensor tokens;   // [P] i32, written by each replay
    vt::Tensor allowed;  // [P, mask_words] i32 when the shape has a mask
    std::unique_ptr<vt::CapturedGraph> graph;
  };
  Graph* GraphFor(const DecodeGraphShape& shape);  // null: the capture failed
  Graph Capture(const DecodeGraphShape& shape);
  ForwardBatch BatchViews(const vt::Tensor& inputs, const DecodeGraphShape& shape) const;
  vt::Tensor SampleRowsView(const vt::Tensor& inputs, const DecodeGraphShape& shape) const;  // [P, 8] i32

  const Model& model_;
  const ModelCaches& caches_;
  int64_t block_size_;
  DecodeGraphOptions options_;
  std::shared_ptr<vt::GraphMemory> memory_;
  std::map<DecodeGraphShape, Graph> graphs_;
  std::set<DecodeGraphShape> eager_shapes_;  // shapes whose capture failed
  std::string last_capture_error_;
};

}  // namespace vllm
