// Decode graphs (src/vllm/worker/decode_graphs.cpp): which batches run as graphs,
// the padded shape a batch gets, and the exact input buffer a replay reads
// (padding rows included), checked on any machine; on a GPU, a shape that cannot
// be recorded falls back to eager steps, and the engine's greedy
// tokens with graphs equal HF's and those of the same engine run eagerly
// (--enforce-eager), for the reference models, with batches that pad.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "testing/op_testing.h"
#include "vllm/engine/llm_engine.h"
#include "vllm/model_loader/safetensors.h"
#include "vllm/worker/cache_engine.h"
#include "vllm/worker/decode_graphs.h"
#include "vllm/worker/model_runner.h"
#include "vt/reach.h"

namespace vllm {
namespace {

constexpr int64_t kBlockSize = 4;

// Only the cache layout matters here: DecodeGraphs' host side never runs the model.
class CacheOnlyModel final : public Model {
 public:
  int64_t vocab_size() const override { return 16; }
  vt::Device device() const override { return vt::kCpu; }
  vt::DType activation_dtype() const override { return vt::DType::kF32; }
  std::vector<LayerCacheSpec> cache_spec() const override {
    return {{.kind = LayerCacheSpec::Kind::kGatedDeltaNet, .conv_dim = 3, .conv_kernel = 4, .num_value_heads = 1,
             .key_head_dim = 2, .value_head_dim = 2}};
  }
  vt::Tensor Forward(const ForwardBatch&, const ModelCaches&) const override {
    throw std::logic_error("CacheOnlyModel has no forward");
  }
};

// Decodes of running requests, as the runner would batch them from its states.
struct Batch {
  std::vector<std::unique_ptr<CachedRequestState>> states;
  InputBatch input;
  // A request with `computed` tokens in the cache decoding `token` at position `computed`.
  void AddDecode(int32_t token, int64_t computed, std::vector<int32_t> blocks, int32_t slot) {
    SamplingParams greedy;
    greedy.temperature = 0;
    const std::string id = "r" + std::to_string(states.size());
    Request request(id, std::vector<int32_t>(static_cast<size_t>(computed), 1), greedy, std::vector<int32_t>{}, 0);
    request.AppendOutputToken(token);
    states.push_back(std::make_unique<CachedRequestState>(CachedRequestState{
        .request = std::move(request), .block_ids = std::move(blocks), .state_slot = slot,
        .num_computed_tokens = computed}));
    input.requests.push_back({.state = states.back().get(), .num_scheduled_tokens = 1, .is_new_sequence = false});
    input.num_decodes = input.size();
  }
};

std::vector<int32_t> Blocks(int32_t first, int32_t count) {
  std::vector<int32_t> blocks;
  for (int32_t b = 0; b < count; ++b) blocks.push_back(first + b);
  return blocks;
}

TEST(DecodeGraphsTest, ThreeDecodesPadToFourRowsOfHarmlessPadding) {
  CacheOnlyModel model;
  const ModelCaches caches = AllocateCaches(model.cache_spec(), 400, kBlockSize, 4, vt::DType::kF32, vt::kCpu);
  DecodeGraphs graphs(model, caches, kBlockSize, {.max_batch = 8, .max_model_len = 2000, .padding_state_slot = 3});
  Batch batch;
  batch.AddDecode(7, 9, {3, 5, 8}, 2);          // position 9: block 8, offset 1
  batch.AddDecode(11, 4, {2, 6}, 0);            // position 4: block 6, offset 0
  batch.AddDecode(13, 600, Blocks(10, 151), 1);  // position 600: block 10 + 150, offset 0
  ASSERT_TRUE(graphs.Accepts(batch.input));
  const DecodeGraphShape shape = graphs.ShapeFor(batch.input);
  EXPECT_EQ(shape.batch, 4);
  EXPECT_EQ(shape.max_seq_len, 1024);  // 601 tokens: the bucket above 512
  EXPECT_EQ(shape.table_width, 256);
  const std::vector<int32_t> v = graphs.PackInputs(&batch.input, shape);
  const int64_t P = 4, W = 256;
  ASSERT_EQ(static_cast<int64_t>(v.size()), 7 * P + 1 + P * W);
  auto at = [&](int64_t offset, int64_t n) { return std::vector<int32_t>(v.begin() + offset, v.begin() + offset + n); };
  EXPECT_EQ(at(0, P), (std::vector<int32_t>{7, 11, 13, 0}));                      // input ids
  EXPECT_EQ(at(P, P), (std::vector<int32_t>{0, 1, 2, 3}));                        // logits rows
  EXPECT_EQ(at(2 * P, P), (std::vector<int32_t>{9, 4, 600, 0}));                  // positions
  EXPECT_EQ(at(3 * P, P), (std::vector<int32_t>{33, 24, 160 * 4, 0}));            // slots: block 0 for padding
  EXPECT_EQ(at(4 * P, P), (std::vector<int32_t>{10, 5, 601, 1}));                 // seq lens
  EXPECT_EQ(at(5 * P, P + 1), (std::vector<int32_t>{0, 1, 2, 3, 4}));             // query start loc
  EXPECT_EQ(at(6 * P + 1, P), (std::vector<int32_t>{2, 0, 1, 3}));                // state slots: padding slot 3
  const int64_t tables = 7 * P + 1;
  EXPECT_EQ(at(tables, 4), (std::vector<int32_t>{3, 5, 8, 0}));
  EXPECT_EQ(at(tables + 2 * W + 149, 3), (std::vector<int32_t>{159, 160, 0}));
  for (int64_t i = 0; i < W; ++i) EXPECT_EQ(v[tables + 3 * W + i], 0) << "padding row's block table";
  Batch five;  // more requests than the shape's rows
  for (int i = 0; i < 5; ++i) five.AddDecode(1, 4, {2, 6}, 0);
  EXPECT_THROW(graphs.PackInputs(&five.input, shape), std::logic_error);
  // An all-padding buffer (the warm-up run before a capture).
  const std::vector<int32_t> padding = graphs.PackInputs(nullptr, shape);
  EXPECT_EQ(std::vector<int32_t>(padding.begin(), padding.begin() + P), (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(std::vector<int32_t>(padding.begin() + 6 * P + 1, padding.begin() + 7 * P + 1),
            (std::vector<int32_t>{3, 3, 3, 3}));
}

TEST(DecodeGraphsTest, ShapesAreBucketedAndCapped) {
  CacheOnlyModel model;
  const ModelCaches caches = AllocateCaches(model.cache_spec(), 400, kBlockSize, 2, vt::DType::kF32, vt::kCpu);
  DecodeGraphs graphs(model, caches, kBlockSize, {.max_batch = 6, .max_model_len = 700, .padding_state_slot = 1});
  Batch one;
  one.AddDecode(1, 20, Blocks(1, 6), 0);
  EXPECT_EQ(graphs.ShapeFor(one.input), (DecodeGraphShape{1, 512, 128}));
  Batch five;
  for (int i = 0; i < 5; ++i) five.AddDecode(1, 650, Blocks(1, 163), 0);
  EXPECT_EQ(graphs.ShapeFor(five.input), (DecodeGraphShape{6, 700, 175}));  // both capped
}

// The shapes captured at start-up are exactly those ShapeFor can give: every padded
// batch size with every context bucket.
TEST(DecodeGraphsTest, StartupShapesAreEveryShapeABatchCanGet) {
  CacheOnlyModel model;
  const ModelCaches caches = AllocateCaches(model.cache_spec(), 400, kBlockSize, 2, vt::DType::kF32, vt::kCpu);
  DecodeGraphs graphs(model, caches, kBlockSize, {.max_batch = 6, .max_model_len = 1500, .padding_state_slot = 1});
  const std::vector<DecodeGraphShape> shapes = graphs.StartupShapes();
  std::vector<DecodeGraphShape> expected;
  for (int64_t p : {1, 2, 4, 6}) {
    for (int64_t s : {512, 1024, 1500}) expected.push_back({p, s, (s + kBlockSize - 1) / kBlockSize});
  }
  EXPECT_EQ(shapes, expected);
  for (int64_t rows = 1; rows <= 6; ++rows) {
    for (int64_t computed : {0, 511, 512, 1023, 1024, 1499}) {
      Batch batch;
      for (int64_t r = 0; r < rows; ++r) batch.AddDecode(1, computed, Blocks(1, 375), 0);
      const DecodeGraphShape shape = graphs.ShapeFor(batch.input);
      EXPECT_NE(std::find(shapes.begin(), shapes.end(), shape), shapes.end())
          << rows << " rows at " << computed << " tokens: shape {" << shape.batch << ", " << shape.max_seq_len << "}";
    }
  }
}

TEST(DecodeGraphsTest, OnlyDecodesOfRunningSequencesWithinTheLimitsRunAsGraphs) {
  CacheOnlyModel model;
  const ModelCaches caches = AllocateCaches(model.cache_spec(), 400, kBlockSize, 2, vt::DType::kF32, vt::kCpu);
  DecodeGraphs graphs(model, caches, kBlockSize, {.max_batch = 2, .max_model_len = 100, .padding_state_slot = 1});
  Batch two;
  two.AddDecode(1, 5, {1, 2}, 0);
  two.AddDecode(1, 6, {3, 4}, 1);
  EXPECT_TRUE(graphs.Accepts(two.input));
  Batch three = std::move(two);
  three.AddDecode(1, 6, {5, 6}, 1);
  EXPECT_FALSE(graphs.Accepts(three.input)) << "more rows than max_batch";
  Batch prefill;
  prefill.AddDecode(1, 2, {1}, 0);
  prefill.states[0]->num_computed_tokens = 0;
  prefill.input.requests[0].num_scheduled_tokens = 3;
  EXPECT_FALSE(graphs.Accepts(prefill.input));
  Batch fresh;
  fresh.AddDecode(1, 0, {1}, 0);
  fresh.input.requests[0].is_new_sequence = true;  // its state must be reset first
  EXPECT_FALSE(graphs.Accepts(fresh.input));
  Batch too_long;
  too_long.AddDecode(1, 100, Blocks(1, 26), 0);
  EXPECT_FALSE(graphs.Accepts(too_long.input)) << "past max_model_len";
  EXPECT_FALSE(graphs.Accepts(InputBatch{}));
}

TEST(DecodeGraphsTest, APaddingSlotOutsideTheStateIsRefused) {
  CacheOnlyModel model;
  const ModelCaches caches = AllocateCaches(model.cache_spec(), 40, kBlockSize, 2, vt::DType::kF32, vt::kCpu);
  EXPECT_THROW(DecodeGraphs(model, caches, kBlockSize, {.max_batch = 2, .max_model_len = 100, .padding_state_slot = 2}),
               std::invalid_argument);
  EXPECT_THROW(DecodeGraphs(model, caches, kBlockSize, {.max_batch = 2, .max_model_len = 100}), std::invalid_argument);
}

// A model whose forward reads its batch back to the host (a wait for the device)
// cannot be recorded: the step runs eagerly instead, the shape is not tried again,
// and the reason is kept.
class HostReadingModel final : public Model {
 public:
  explicit HostReadingModel(vt::Device device) : device_(device) {}
  int64_t vocab_size() const override { return 16; }
  vt::Device device() const override { return device_; }
  vt::DType activation_dtype() const override { return vt::DType::kF32; }
  std::vector<LayerCacheSpec> cache_spec() const override { return CacheOnlyModel().cache_spec(); }
  // Row r: one-hot at (input id + 1) % 16.
  vt::Tensor Forward(const ForwardBatch& batch, const ModelCaches&) const override {
    const std::vector<int64_t> ids = batch.input_ids.ToIntVector();
    std::vector<float> logits(ids.size() * 16, 0.0f);
    for (size_t r = 0; r < ids.size(); ++r) logits[r * 16 + (ids[r] + 1) % 16] = 1.0f;
    return vt::Tensor::FromVector(logits, {static_cast<int64_t>(ids.size()), 16}).To(device_);
  }

 private:
  vt::Device device_;
};

TEST(DecodeGraphsTest, AShapeThatCannotBeRecordedRunsEagerly) {
  const std::vector<vt::Device> gpus = vt::testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  for (vt::Device device : gpus) {
    SCOPED_TRACE(device.ToString());
    HostReadingModel model(device);
    ModelRunner runner(model, AllocateCaches(model.cache_spec(), 40, kBlockSize, 3, vt::DType::kF32, device),
                       kBlockSize, 0, DecodeGraphOptions{.max_batch = 4, .max_model_len = 100, .padding_state_slot = 2});
    SamplingParams greedy;
    greedy.temperature = 0;
    SchedulerOutput prompts;  // new sequences: run eagerly, never as graphs
    prompts.scheduled_new_reqs = {
        {.req_id = "r0", .prompt_token_ids = std::vector<int32_t>(6, 1), .sampling_params = greedy,
         .block_ids = {1, 2}, .state_slot = 0},
        {.req_id = "r1", .prompt_token_ids = std::vector<int32_t>(3, 1), .sampling_params = greedy,
         .block_ids = {3}, .state_slot = 1}};
    prompts.num_scheduled_tokens = {{"r0", 6}, {"r1", 3}};
    runner.Execute(prompts);
    vt::reach::Reset();
    for (int step = 0; step < 2; ++step) {  // two decodes of the same padded shape
      SchedulerOutput decodes;
      decodes.scheduled_cached_reqs = {
          {.req_id = "r0", .new_token_ids = {5}, .num_computed_tokens = 6 + step},
          {.req_id = "r1", .new_token_ids = {9}, .new_block_ids = step == 1 ? std::vector<int32_t>{4}
                                                                             : std::vector<int32_t>{},
           .num_computed_tokens = 3 + step}};
      decodes.num_scheduled_tokens = {{"r0", 1}, {"r1", 1}};
      const RunnerOutput out = runner.Execute(decodes);
      EXPECT_EQ(out.sampled.at("r0").token_id, 6);
      EXPECT_EQ(out.sampled.at("r1").token_id, 10);
    }
    EXPECT_EQ(vt::reach::Count("DecodeGraphs::Capture"), 1u) << "a failed shape is not captured again";
    EXPECT_EQ(vt::reach::Count("ModelRunner::DecodeGraph"), 0u);
  }
}

// ---- on a GPU: the engine with graphs against HF and against itself, eager -----

std::string ModelDir(const std::string& name) { return std::string(VT_TEST_DATA_DIR) + "/models/" + name; }

std::vector<std::vector<int32_t>> ReadIds(const std::string& name, const std::string& key) {
  SafetensorsFile file = SafetensorsFile::Open(ModelDir(name) + "/reference.safetensors");
  std::vector<std::vector<int32_t>> all;
  for (int i = 0; file.FindTensor(key + "." + std::to_string(i)); ++i) {
    const std::vector<int64_t> v = file.Tensor(*file.FindTensor(key + "." + std::to_string(i))).ToIntVector();
    all.emplace_back(v.begin(), v.end());
  }
  return all;
}

// Every prompt at once (batches of 5, 4, ... as they finish: padded to 8, 4, ...),
// f32 activations, greedy or (`sampled`) at temperature 0.8 with top-k 20, top-p 0.9
// and a seed per request; returns each request's tokens. `captures_at_start`: the
// graphs captured by the engine's construction. `penalized`: repetition, frequency
// and presence penalties on every request.
std::vector<std::vector<int32_t>> RunPrompts(const std::string& name, vt::Device device, bool eager,
                                             const std::vector<std::vector<int32_t>>& prompts, bool sampled = false,
                                             size_t* captures_at_start = nullptr,
                                             std::optional<int64_t> max_capture_size = std::nullopt,
                                             bool penalized = false, int logprobs = -1,
                                             std::vector<std::vector<TokenLogprobs>>* logprobs_out = nullptr,
                                             const std::function<void(SamplingParams&, size_t)>& edit = nullptr) {
  EngineConfig c;
  c.model = ModelDir(name) + "/hf";
  c.device = device;
  c.dtype = "float32";
  c.max_num_seqs = 8;
  c.max_model_len = 256;
  c.block_size = 4;
  c.num_gpu_blocks_override = 512;
  c.enforce_eager = eager;
  c.max_cudagraph_capture_size = max_capture_size;
  LLMEngine engine(c);
  if (captures_at_start) *captures_at_start = vt::reach::Count("DecodeGraphs::Capture");
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams p;
    p.temperature = 0;
    if (sampled) {
      p.temperature = 0.8;
      p.top_k = 20;
      p.top_p = 0.9;
      p.seed = 1000 + i;
    }
    if (penalized) {
      p.repetition_penalty = 1.3;
      p.frequency_penalty = 0.4;
      p.presence_penalty = 0.3;
    }
    if (logprobs >= 0) p.logprobs = logprobs;
    if (edit) edit(p, i);
    p.max_tokens = 8 + 2 * static_cast<int64_t>(i);  // requests finish at different steps
    p.ignore_eos = true;
    engine.AddRequest("r" + std::to_string(i), prompts[i], p);
  }
  std::map<std::string, std::vector<int32_t>> done;
  std::map<std::string, std::vector<TokenLogprobs>> done_logprobs;
  while (engine.HasUnfinishedRequests()) {
    for (RequestOutput& out : engine.Step()) {
      if (out.finished) {
        done[out.request_id] = out.token_ids;
        done_logprobs[out.request_id] = out.logprobs;
      }
    }
  }
  std::vector<std::vector<int32_t>> tokens;
  for (size_t i = 0; i < prompts.size(); ++i) tokens.push_back(done.at("r" + std::to_string(i)));
  if (logprobs_out) {
    logprobs_out->clear();
    for (size_t i = 0; i < prompts.size(); ++i) logprobs_out->push_back(done_logprobs.at("r" + std::to_string(i)));
  }
  return tokens;
}

class DecodeGraphEngineTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodeGraphEngineTest, GreedyTokensEqualHfAndTheEagerEngine) {
  const std::vector<vt::Device> gpus = vt::testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  const auto prompts = ReadIds(GetParam(), "prompt_ids");
  const auto hf = ReadIds(GetParam(), "greedy_ids");
  for (vt::Device device : gpus) {
    SCOPED_TRACE(device.ToString());
    vt::reach::Reset();
    const auto eager = RunPrompts(GetParam(), device, true, prompts);
    EXPECT_EQ(vt::reach::Count("ModelRunner::DecodeGraph"), 0u);
    vt::reach::Reset();
    size_t captures_at_start = 0;
    const auto graphed = RunPrompts(GetParam(), device, false, prompts, false, &captures_at_start);
    EXPECT_GT(vt::reach::Count("ModelRunner::DecodeGraph"), 0u);
    // Batches 1, 2, 4, 8 with the one context bucket (max_model_len 256), all at
    // start-up, none while serving.
    EXPECT_EQ(captures_at_start, 4u);
    EXPECT_EQ(vt::reach::Count("DecodeGraphs::Capture"), 4u) << "a capture while serving";
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(graphed[i], eager[i]) << "prompt " << i;
      const std::vector<int32_t> hf_prefix(hf[i].begin(), hf[i].begin() + static_cast<int64_t>(graphed[i].size()));
      EXPECT_EQ(graphed[i], hf_prefix) << "prompt " << i;
    }
  }
}

// --max-cudagraph-capture-size 2: graphs for batches 1 and 2 only, captured at
// start-up; the larger batches run eagerly, with the same tokens.
TEST_P(DecodeGraphEngineTest, ACaptureSizeCapsTheGraphBatches) {
  const std::vector<vt::Device> gpus = vt::testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  const auto prompts = ReadIds(GetParam(), "prompt_ids");
  for (vt::Device device : gpus) {
    SCOPED_TRACE(device.ToString());
    const auto eager = RunPrompts(GetParam(), device, true, prompts);
    vt::reach::Reset();
    size_t captures_at_start = 0;
    const auto capped = RunPrompts(GetParam(), device, false, prompts, false, &captures_at_start, 2);
    EXPECT_EQ(captures_at_start, 2u);
    EXPECT_EQ(vt::reach::Count("DecodeGraphs::Capture"), 2u);
    EXPECT_GT(vt::reach::Count("ModelRunner::DecodeGraph"), 0u) << "the last steps have 1 or 2 requests";
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(capped[i], eager[i]) << "prompt " << i;
  }
}

// Sampled requests replay the same graphs (vt::Sample draws from the graph's logits
// after the replay): the same tokens as eager steps, which draw on the device too,
// never on the host.
TEST_P(DecodeGraphEngineTest, SampledTokensEqualTheEagerEngine) {
  const std::vector<vt::Device> gpus = vt::testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  const auto prompts = ReadIds(GetParam(), "prompt_ids");
  for (vt::Device device : gpus) {
    SCOPED_TRACE(device.ToString());
    vt::reach::Reset();
    const auto eager = RunPrompts(GetParam(), device, true, prompts, true);
    EXPECT_GT(vt::reach::Count("ModelRunner::DeviceSampler"), 0u);
    EXPECT_EQ(vt::reach::Count("ModelRunner::HostSampler"), 0u);
    vt::reach::Reset();
    const auto graphed = RunPrompts(GetParam(), device, false, prompts, true);
    EXPECT_GT(vt::reach::Count("ModelRunner::DecodeGraph"), 0u);
    EXPECT_EQ(vt::reach::Count("ModelRunner::HostSampler"), 0u);
    const auto greedy = RunPrompts(GetParam(), device, false, prompts);
    size_t differ_from_greedy = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(graphed[i], eager[i]) << "prompt " << i;
      differ_from_greedy += graphed[i] != greedy[i];
    }
    EXPECT_GT(differ_from_greedy, 0u) << "sampling at temperature 0.8 gave the greedy tokens for every prompt";
  }
}

// Penalties run on the device (vt::Penalties before vt::Sample), in graph steps and
// eager ones: the greedy tokens of the CPU engine, whose host Sampler applies them,
// and not those of unpenalized decoding.
TEST_P(DecodeGraphEngineTest, PenalizedTokensEqualTheCpuEngine) {
  const std::vector<vt::Device> gpus = vt::testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  const auto prompts = ReadIds(GetParam(), "prompt_ids");
  const auto cpu = RunPrompts(GetParam(), vt::kCpu, true, prompts, false, nullptr, std::nullopt, true);
  for (vt::Device device : gpus) {
    SCOPED_TRACE(device.ToString());
    for (bool eager : {true, false}) {
      vt::reach::Reset();
      const auto got = RunPrompts(GetParam(), device, eager, prompts, false, nullptr, std::nullopt, true);
      EXPECT_GT(vt::reach::Count("ModelRunner::PenaltiesOnDevice"), 0u);
      EXPECT_EQ(vt::reach::Count("ModelRunner::HostSampler"), 0u);
      if (!eager) {
        EXPECT_GT(vt::reach::Count("ModelRunner::DecodeGraph"), 0u);
      }
      for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], cpu[i]) << "prompt " << i << " eager " << eager;
    }
  }
  const auto plain = RunPrompts(GetParam(), vt::kCpu, true, prompts);
  size_t differ = 0;
  for (size_t i = 0; i < prompts.size(); ++i) differ += plain[i] != cpu[i];
  EXPECT_GT(differ, 0u) << "the penalties changed no prompt's tokens: the test is weak";
}

// allowed_token_ids, bad words and min_tokens (its stop tokens masked) are cleared bits
// of vt::Sample's rows on the device, and logit_bias a row added to the logits, in
// graph steps and eager ones: the CPU engine's tokens (its host Sampler adds and masks
// on the host), and not those of plain decoding.
TEST_P(DecodeGraphEngineTest, MaskedRequestsEqualTheCpuEngine) {
  const std::vector<vt::Device> gpus = vt::testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  const auto prompts = ReadIds(GetParam(), "prompt_ids");
  const auto plain = RunPrompts(GetParam(), vt::kCpu, true, prompts);
  const auto edit = [&plain](SamplingParams& p, size_t i) {
    const std::vector<int32_t>& greedy = plain[i];
    if (i % 4 == 0) {
      p.bad_words_token_ids = {{greedy[0]}, {greedy[1], greedy[2]}};
    } else if (i % 4 == 1) {
      for (int32_t t = 0; t < 64; ++t) p.allowed_token_ids.push_back(t);
    } else if (i % 4 == 2) {
      p.min_tokens = 6;
      p.stop_token_ids = {greedy[0], greedy[3]};
    } else {  // logit_bias: a dense row added on the device
      p.logit_bias = {{greedy[0], -50.0f}, {greedy[2], 5.0f}};
    }
  };
  const auto cpu = RunPrompts(GetParam(), vt::kCpu, true, prompts, false, nullptr, std::nullopt, false, -1, nullptr, edit);
  size_t differ = 0;
  for (size_t i = 0; i < prompts.size(); ++i) differ += plain[i] != cpu[i];
  EXPECT_GT(differ, 0u) << "the masks changed no prompt's tokens: the test is weak";
  for (vt::Device device : gpus) {
    for (bool eager : {true, false}) {
      SCOPED_TRACE(device.ToString() + (eager ? " eager" : " graphs"));
      vt::reach::Reset();
      const auto got = RunPrompts(GetParam(), device, eager, prompts, false, nullptr, std::nullopt, false, -1, nullptr, edit);
      EXPECT_GT(vt::reach::Count("ModelRunner::SampleMasksOnDevice"), 0u);
      EXPECT_EQ(vt::reach::Count("ModelRunner::HostSampler"), 0u);
      if (!eager) {
        EXPECT_GT(vt::reach::Count("ModelRunner::DecodeGraph"), 0u);
      }
      for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], cpu[i]) << "prompt " << i;
    }
  }
}

// Logprobs (top 5 and the sampled token's) come from vt::TopLogprobs on the device, in
// graph steps and eager ones, with penalties (the logprobs are of the logits before
// them): the CPU engine's tokens and logprobs, whose host Sampler computes them.
TEST_P(DecodeGraphEngineTest, LogprobsEqualTheCpuEngine) {
  const std::vector<vt::Device> gpus = vt::testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  const auto prompts = ReadIds(GetParam(), "prompt_ids");
  for (bool penalized : {false, true}) {
    std::vector<std::vector<TokenLogprobs>> cpu_logprobs;
    const auto cpu =
        RunPrompts(GetParam(), vt::kCpu, true, prompts, false, nullptr, std::nullopt, penalized, 5, &cpu_logprobs);
    for (vt::Device device : gpus) {
      for (bool eager : {true, false}) {
        SCOPED_TRACE(device.ToString() + (eager ? " eager" : " graphs") + (penalized ? " penalized" : ""));
        vt::reach::Reset();
        std::vector<std::vector<TokenLogprobs>> got_logprobs;
        const auto got =
            RunPrompts(GetParam(), device, eager, prompts, false, nullptr, std::nullopt, penalized, 5, &got_logprobs);
        EXPECT_GT(vt::reach::Count("ModelRunner::LogprobsOnDevice"), 0u);
        EXPECT_EQ(vt::reach::Count("ModelRunner::HostSampler"), 0u);
        if (!eager) {
          EXPECT_GT(vt::reach::Count("ModelRunner::DecodeGraph"), 0u);
        }
        for (size_t i = 0; i < prompts.size(); ++i) {
          ASSERT_EQ(got[i], cpu[i]) << "prompt " << i;
          ASSERT_EQ(got_logprobs[i].size(), cpu_logprobs[i].size()) << "prompt " << i;
          for (size_t t = 0; t < got[i].size(); ++t) {
            const TokenLogprobs& g = got_logprobs[i][t];
            const TokenLogprobs& c = cpu_logprobs[i][t];
            ASSERT_EQ(g.size(), c.size()) << "prompt " << i << " token " << t;
            for (size_t j = 0; j < g.size(); ++j) {
              // f32 device logits against the CPU's: the ids of near-ties may swap.
              EXPECT_NEAR(g[j].second, c[j].second, 2e-3) << "prompt " << i << " token " << t << " entry " << j;
            }
            EXPECT_EQ(g.front().first, c.front().first) << "prompt " << i << " token " << t;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, DecodeGraphEngineTest, ::testing::Values("qwen35_dense_untied", "qwen3"));

}  // namespace
}  // namespace vllm
