// Decode steps replayed as device graphs (vLLM's CUDA graphs; `--enforce-eager`
// turns them off). A batch-1 decode of a 9B model is ~550 kernels of a few
// microseconds each: launched one by one from the host, the gaps between them
// cost a large part of the step. A graph replays them with one launch.
//
// A graph is captured per padded shape: the batch padded to the next power of two
// (at most max_batch) and the longest sequence rounded up to a bucket (powers of two
// from 512, at most max_model_len), because kernel choices and launch sizes taken at
// capture (the attention's split over the context, the block table's width) are
// fixed in the graph. The engine captures every shape at start-up (CaptureAll, as
// vLLM captures its cudagraph sizes before serving), so no request waits for a
// capture; a shape whose capture failed runs eagerly. Every graph reads its inputs
// from one device buffer of its own, rewritten by one host copy before each replay
// (PackInputs gives its layout), and writes the logits of its rows into one buffer
// all graphs share ([max_batch, vocab]); the caller samples from them (vt::Sample,
// enqueued after the replay): a step's grammar bitmasks can then be filled on the
// host while the graph runs.
//
// Padding rows are harmless: token 0 at position 0, its K/V written to slot 0 of
// the null block 0 (never given to a request), a context of that one token, and
// the recurrent state of `padding_state_slot`, a slot the scheduler never hands
// out. Their logits are ignored.
//
// Before a shape's capture, the forward runs once eagerly on an all-padding batch
// (first-use work such as library handles must not happen while recording, and
// that run touches no request's state). All graphs share one GraphMemory: they
// replay on the device's one queue, never at the same time, and keep no output of
// their own alive (the logits go to the shared buffer), so the graphs' memory is
// that of the largest one.
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
  auto operator<=>(const DecodeGraphShape&) const = default;
};

class DecodeGraphs {
 public:
  DecodeGraphs(const Model& model, const ModelCaches& caches, int64_t block_size, DecodeGraphOptions options);

  // Whether `batch` can run as a graph: only decodes of running sequences (one
  // token each, all sampling), at most max_batch of them, contexts within max_model_len.
  bool Accepts(const InputBatch& batch) const;
  // Enqueues the graph of the batch's shape (captured first if it is new) and
  // returns the logits of the scheduled requests, [B, vocab] in batch order, a view
  // of the shared buffer that the next Run overwrites. Returns without waiting for
  // the device. nullopt when that capture failed (out of device memory, say): the
  // shape is then remembered as eager-only, the reason kept in last_capture_error(),
  // and the caller runs the step eagerly.
  std::optional<vt::Tensor> Run(const InputBatch& batch);

  // What CaptureAll did.
  struct CaptureSummary {
    int64_t captured = 0;  // graphs now held (those captured before included)
    int64_t failed = 0;    // shapes left to run eagerly
    double seconds = 0;
    std::string error;     // last_capture_error() when some failed
  };
  // Captures every shape of StartupShapes() not captured yet.
  CaptureSummary CaptureAll();
  // Every shape a batch can get: each padded batch size (1, 2, 4, ... and
  // max_batch) with each context bucket (512, 1024, ... and max_model_len).
  std::vector<DecodeGraphShape> StartupShapes() const;
  size_t num_graphs() const { return graphs_.size(); }
  const std::string& last_capture_error() const { return last_capture_error_; }

  DecodeGraphShape ShapeFor(const InputBatch& batch) const;
  // The input buffer of `shape` for `batch` (nullptr: every row padding), int32:
  //   input_ids [P] | logits_rows [P] | positions [P] | slot_mapping [P] |
  //   seq_lens [P] | query_start_loc [P + 1] | state_slots [P] | block_tables [P, W]
  std::vector<int32_t> PackInputs(const InputBatch* batch, const DecodeGraphShape& shape) const;

 private:
  struct Graph {
    vt::Tensor inputs;   // [PackInputs' length] i32 on the device
    ForwardBatch batch;  // views of `inputs`
    std::unique_ptr<vt::CapturedGraph> graph;
  };
  Graph* GraphFor(const DecodeGraphShape& shape);  // null: the capture failed
  Graph Capture(const DecodeGraphShape& shape);
  ForwardBatch BatchViews(const vt::Tensor& inputs, const DecodeGraphShape& shape) const;

  const Model& model_;
  const ModelCaches& caches_;
  int64_t block_size_;
  DecodeGraphOptions options_;
  std::shared_ptr<vt::GraphMemory> memory_;
  vt::Tensor logits_;  // [max_batch, vocab], every graph's output; allocated before the first capture
  std::map<DecodeGraphShape, Graph> graphs_;
  std::set<DecodeGraphShape> eager_shapes_;  // shapes whose capture failed
  std::string last_capture_error_;
};

}  // namespace vllm
