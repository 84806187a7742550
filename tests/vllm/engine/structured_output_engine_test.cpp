// Structured outputs in the engine (structured_output_manager.h), with the qwen3
// random-weight model and the byte-level test tokenizer: outputs match their grammar
// when requests are preempted and recomputed, a grammar that ends under ignore_eos
// finishes the request, a bad grammar is refused at AddRequest, and the mask is
// applied by the runner (reach counter), on a GPU by the device sampler.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <regex>
#include <thread>

#include "vllm/engine/llm_engine.h"
#include "testing/op_testing.h"
#include "vllm/engine/structured_output_manager.h"
#include "vllm/tokenizer/tokenizer.h"
#include "vt/reach.h"

namespace vllm {
namespace {

EngineConfig TestConfig() {
  EngineConfig c;
  c.model = std::string(VT_TEST_DATA_DIR) + "/models/qwen3/hf";
  c.tokenizer = std::string(VT_TEST_DATA_DIR) + "/openai_server/tokenizer";
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 160;
  c.num_threads = 1;
  c.on_log = [](const std::string&) {};
  return c;
}

SamplingParams Constrained(const std::string& regex, uint64_t seed) {
  SamplingParams p;
  p.temperature = 1.0;
  p.seed = seed;
  p.max_tokens = 90;
  p.structured_outputs.emplace();
  p.structured_outputs->regex = regex;
  return p;
}

std::map<std::string, RequestOutput> RunAll(LLMEngine& engine) {
  std::map<std::string, RequestOutput> finished;
  while (engine.HasUnfinishedRequests()) {
    for (RequestOutput& out : engine.Step()) {
      if (out.finished) finished[out.request_id] = std::move(out);
    }
  }
  return finished;
}

// Every output but "plain" matches `regex`, and `got` has `expected`'s tokens.
void ExpectSameTokensWithinTheGrammar(const std::map<std::string, RequestOutput>& got,
                                      const std::map<std::string, RequestOutput>& expected, const std::string& regex) {
  for (const auto& [id, out] : got) {
    if (id != "plain") {
      EXPECT_TRUE(std::regex_match(out.text, std::regex(regex))) << id << ": " << out.text;
    }
    EXPECT_EQ(out.token_ids, expected.at(id).token_ids) << id;
  }
}

TEST(StructuredOutputEngineTest, OutputsMatchThroughPreemption) {
  const std::string regex = "[a-z]{20,40}-[0-9]{10,30}";
  std::map<std::string, std::vector<int32_t>> alone;
  {
    LLMEngine engine(TestConfig());
    for (int i = 0; i < 6; ++i) {
      engine.AddRequest("r" + std::to_string(i), engine.Encode("prompt " + std::to_string(i)), Constrained(regex, i));
      alone["r" + std::to_string(i)] = RunAll(engine).begin()->second.token_ids;
    }
  }
  EngineConfig tight = TestConfig();
  tight.block_size = 4;
  tight.max_model_len = 100;
  tight.num_gpu_blocks_override = 40;  // six requests of up to ~80 tokens do not fit at once
  LLMEngine engine(tight);
  for (int i = 0; i < 6; ++i) {
    engine.AddRequest("r" + std::to_string(i), engine.Encode("prompt " + std::to_string(i)), Constrained(regex, i));
  }
  const uint64_t masked_before = vt::reach::Count("ModelRunner::GrammarBitmask");
  const auto together = RunAll(engine);
  EXPECT_GT(engine.stats().num_preemptions, 0) << "the pool was meant to force preemption";
  EXPECT_GT(vt::reach::Count("ModelRunner::GrammarBitmask"), masked_before);
  for (const auto& [id, out] : together) {
    EXPECT_TRUE(std::regex_match(out.text, std::regex(regex))) << id << ": " << out.text;
    EXPECT_EQ(out.finish_reason, "stop");
    // Seeded: preemption and batching change nothing.
    EXPECT_EQ(out.token_ids, alone.at(id)) << id;
  }
}

// Greedy requests under a grammar take the device argmax with the bitmask rows
// (vt::Argmax's allowed); asking for logprobs sends the same requests through the host
// sampler. Both give the same tokens, in a batch that mixes them with plain greedy ones.
TEST(StructuredOutputEngineTest, GreedyUnderAGrammarTakesTheMaskedDeviceArgmax) {
  const std::string regex = "[a-z]{5,30}-[0-9]{3,12}";
  const auto run = [&](bool with_logprobs) {
    LLMEngine engine(TestConfig());
    for (int i = 0; i < 4; ++i) {
      SamplingParams p = Constrained(regex, i);
      p.temperature = 0.0;
      if (with_logprobs) p.logprobs = 0;
      engine.AddRequest("g" + std::to_string(i), engine.Encode("prompt " + std::to_string(i)), p);
    }
    SamplingParams plain;
    plain.temperature = 0.0;
    plain.max_tokens = 12;
    engine.AddRequest("plain", engine.Encode("plain prompt"), plain);
    return RunAll(engine);
  };
  const uint64_t device_before = vt::reach::Count("ModelRunner::GrammarBitmaskOnDevice");
  const uint64_t host_before = vt::reach::Count("ModelRunner::GrammarBitmask");
  const auto on_device = run(false);
  EXPECT_GT(vt::reach::Count("ModelRunner::GrammarBitmaskOnDevice"), device_before);
  EXPECT_EQ(vt::reach::Count("ModelRunner::GrammarBitmask"), host_before) << "no host-sampled grammar row";
  const auto on_host = run(true);
  EXPECT_GT(vt::reach::Count("ModelRunner::GrammarBitmask"), host_before);
  ASSERT_EQ(on_device.size(), 5u);
  ExpectSameTokensWithinTheGrammar(on_device, on_host, regex);
}

// On a GPU, requests under grammars are drawn by vt::Sample with the bitmask as its
// `allowed`, sampled and greedy alike, eagerly and after decode graphs (the bitmask
// filled while the graph runs): outputs in the grammar, the same seeded tokens both
// ways, no logits sent to the host.
TEST(StructuredOutputEngineTest, OnAGpuGrammarsMaskTheDeviceSamplerEagerAndInGraphs) {
  const std::vector<vt::Device> gpus = vt::testing::GpuTestDevices();
  if (gpus.empty()) GTEST_SKIP() << "no GPU here";
  const std::string regex = "[a-z]{5,30}-[0-9]{3,12}";
  for (vt::Device device : gpus) {
    SCOPED_TRACE(device.ToString());
    const auto run = [&](bool eager) {
      EngineConfig config = TestConfig();
      config.device = device;
      config.dtype = "float32";
      config.enforce_eager = eager;
      LLMEngine engine(config);
      for (int i = 0; i < 6; ++i) {
        SamplingParams p = Constrained(regex, i);
        if (i >= 4) p.temperature = 0.0;  // greedy under the grammar
        engine.AddRequest("r" + std::to_string(i), engine.Encode("prompt " + std::to_string(i)), p);
      }
      SamplingParams plain;
      plain.temperature = 0.8;
      plain.seed = 9;
      plain.max_tokens = 12;
      engine.AddRequest("plain", engine.Encode("plain prompt"), plain);
      return RunAll(engine);
    };
    const uint64_t host_before = vt::reach::Count("ModelRunner::GrammarBitmask");
    const uint64_t sampler_before = vt::reach::Count("ModelRunner::HostSampler");
    const uint64_t in_graph_before = vt::reach::Count("ModelRunner::GrammarBitmaskInGraph");
    const auto eager = run(true);
    EXPECT_EQ(vt::reach::Count("ModelRunner::GrammarBitmaskInGraph"), in_graph_before);
    const auto graphed = run(false);
    EXPECT_GT(vt::reach::Count("ModelRunner::GrammarBitmaskInGraph"), in_graph_before);
    EXPECT_EQ(vt::reach::Count("ModelRunner::GrammarBitmask"), host_before) << "no grammar row on the host";
    EXPECT_EQ(vt::reach::Count("ModelRunner::HostSampler"), sampler_before) << "no step sampled on the host";
    ASSERT_EQ(graphed.size(), 7u);
    ExpectSameTokensWithinTheGrammar(graphed, eager, regex);
  }
}

// A step's bitmask rows filled by several host threads (the engine's --threads) give
// the tokens one thread gives: every row lands where its request reads it.
TEST(StructuredOutputEngineTest, MaskRowsFilledByThreadsEqualOneThread) {
  const std::string regex = "[a-z]{5,30}-[0-9]{3,12}";
  const auto run = [&](int threads) {
    EngineConfig config = TestConfig();
    config.num_threads = threads;
    LLMEngine engine(config);
    for (int i = 0; i < 10; ++i) {
      SamplingParams p = Constrained(i % 2 ? regex : "(yes|no|maybe) [0-9]{2,9}", i);
      engine.AddRequest("r" + std::to_string(i), engine.Encode("prompt " + std::to_string(i)), p);
    }
    return RunAll(engine);
  };
  const auto one = run(1), four = run(4);
  ASSERT_EQ(one.size(), 10u);
  for (const auto& [id, out] : one) EXPECT_EQ(four.at(id).token_ids, out.token_ids) << id;
}

// The engine's stats count one bitmask row per token a constrained request sampled
// (none for the plain one) and the host time spent filling them.
TEST(StructuredOutputEngineTest, StatsCountABitmaskRowPerConstrainedToken) {
  LLMEngine engine(TestConfig());
  for (int i = 0; i < 4; ++i) {
    engine.AddRequest("r" + std::to_string(i), engine.Encode("prompt " + std::to_string(i)),
                      Constrained("[a-z]{5,20}-[0-9]{3,9}", i));
  }
  SamplingParams plain;
  plain.temperature = 0.0;
  plain.max_tokens = 7;
  engine.AddRequest("plain", engine.Encode("plain prompt"), plain);
  const auto outputs = RunAll(engine);
  int64_t constrained_tokens = 0;
  for (const auto& [id, out] : outputs) {
    if (id != "plain") constrained_tokens += static_cast<int64_t>(out.token_ids.size());
  }
  const StructuredOutputStats stats = engine.stats().structured_outputs;
  EXPECT_EQ(stats.num_bitmask_rows, constrained_tokens);
  EXPECT_GT(stats.num_bitmask_steps, 0);
  EXPECT_LE(stats.num_bitmask_steps, stats.num_bitmask_rows);
  EXPECT_GT(stats.bitmask_seconds, 0.0);
}

// With precompute_masks (GPU engines), a new grammar's whole mask cache is computed
// in the background after MakeRequest; without it, only what requests reach.
TEST(StructuredOutputEngineTest, ANewGrammarsMasksArePrecomputedInTheBackground) {
  const Tokenizer tokenizer = Tokenizer::FromHfDirectory(std::string(VT_TEST_DATA_DIR) + "/openai_server/tokenizer");
  const int32_t vocab = tokenizer.vocab_size();
  for (bool precompute : {false, true}) {
    SCOPED_TRACE(precompute ? "precompute" : "on first use");
    StructuredOutputManager manager(&tokenizer, {0}, vocab, "", 2, precompute);
    const auto request = manager.MakeRequest(Constrained("[a-z]{5,20}-[0-9]{3,9}", 1), {1, 2, 3});
    const structured_output::CompiledGrammar& grammar = request->matcher.compiled();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (precompute && !grammar.MasksComplete() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(grammar.MasksComplete(), precompute);
  }
}

// With fill_during_forward (GPU engines), FillBitmask only starts the fill: the
// rows are those of a synchronous fill once await_grammar_bitmask returns, the
// stats count them, and the next FillBitmask waits for a fill nobody awaited.
TEST(StructuredOutputEngineTest, AFillDuringTheForwardGivesTheSynchronousRows) {
  const Tokenizer tokenizer = Tokenizer::FromHfDirectory(std::string(VT_TEST_DATA_DIR) + "/openai_server/tokenizer");
  const int32_t vocab = tokenizer.vocab_size();
  StructuredOutputManager sync(&tokenizer, {0}, vocab, "", 2, false, false);
  StructuredOutputManager overlapped(&tokenizer, {0}, vocab, "", 3, false, true);
  Scheduler scheduler({.max_num_batched_tokens = 64, .max_num_seqs = 8, .max_model_len = 64},
                      {.block_size = 4, .num_blocks = 64});
  for (int i = 0; i < 7; ++i) {
    const std::vector<int32_t> prompt = tokenizer.Encode("prompt " + std::to_string(i));
    const SamplingParams params = Constrained(i % 2 ? "[a-z]{5,20}-[0-9]{3,9}" : "(yes|no) [0-9]{2}", i);
    auto request = std::make_unique<Request>("r" + std::to_string(i), prompt, params, std::vector<int32_t>{0}, i);
    request->structured_output_request = (i < 6 ? overlapped : sync).MakeRequest(params, prompt);
    scheduler.add_request(std::move(request));
  }
  SchedulerOutput expected = scheduler.schedule();
  SchedulerOutput got = expected;
  sync.FillBitmask(expected, scheduler);
  EXPECT_FALSE(expected.await_grammar_bitmask) << "a synchronous fill is done when FillBitmask returns";
  ASSERT_EQ(expected.structured_output_request_ids.size(), 7u);
  overlapped.FillBitmask(got, scheduler);
  ASSERT_TRUE(got.await_grammar_bitmask);
  EXPECT_EQ(got.structured_output_request_ids, expected.structured_output_request_ids);
  EXPECT_EQ(got.grammar_bitmask.size(), expected.grammar_bitmask.size()) << "sized before the fill starts";
  got.await_grammar_bitmask();
  got.await_grammar_bitmask();  // again: returns at once
  EXPECT_EQ(got.grammar_bitmask, expected.grammar_bitmask);
  EXPECT_EQ(overlapped.stats().num_bitmask_rows, 7);
  EXPECT_EQ(overlapped.stats().num_bitmask_steps, 1);
  EXPECT_GT(overlapped.stats().bitmask_seconds, 0.0);
  EXPECT_LE(overlapped.stats().bitmask_wait_seconds, overlapped.stats().bitmask_seconds);
  EXPECT_EQ(sync.stats().bitmask_wait_seconds, sync.stats().bitmask_seconds) << "a synchronous fill is all waited for";
  SchedulerOutput unawaited = expected;  // never awaited: the next fill waits for it
  overlapped.FillBitmask(unawaited, scheduler);
  overlapped.FillBitmask(got, scheduler);
  EXPECT_EQ(overlapped.stats().num_bitmask_steps, 2);
  got.await_grammar_bitmask();
  EXPECT_EQ(unawaited.grammar_bitmask, expected.grammar_bitmask);
  EXPECT_EQ(got.grammar_bitmask, expected.grammar_bitmask);
  EXPECT_EQ(overlapped.stats().num_bitmask_rows, 21);
}

// The words of a finished step come back (RecycleBitmask) and the next fill reuses
// them: whatever they held, the rows are those of a fresh synchronous fill.
TEST(StructuredOutputEngineTest, ARecycledBitmaskIsWhollyRewritten) {
  const Tokenizer tokenizer = Tokenizer::FromHfDirectory(std::string(VT_TEST_DATA_DIR) + "/openai_server/tokenizer");
  const int32_t vocab = tokenizer.vocab_size();
  StructuredOutputManager sync(&tokenizer, {0}, vocab, "", 1, false, false);
  StructuredOutputManager overlapped(&tokenizer, {0}, vocab, "", 2, false, true);
  Scheduler scheduler({.max_num_batched_tokens = 64, .max_num_seqs = 8, .max_model_len = 64},
                      {.block_size = 4, .num_blocks = 64});
  for (int i = 0; i < 3; ++i) {
    const std::vector<int32_t> prompt = tokenizer.Encode("prompt " + std::to_string(i));
    const SamplingParams params = Constrained(i % 2 ? "[0-9]{3}" : "(yes|no)", i);
    auto request = std::make_unique<Request>("r" + std::to_string(i), prompt, params, std::vector<int32_t>{0}, i);
    request->structured_output_request = overlapped.MakeRequest(params, prompt);
    scheduler.add_request(std::move(request));
  }
  (void)sync.MakeRequest(Constrained("(yes|no)", 0), tokenizer.Encode("x"));  // prepares its vocabulary
  SchedulerOutput first = scheduler.schedule();
  SchedulerOutput expected = first, second = first;
  sync.FillBitmask(expected, scheduler);
  overlapped.FillBitmask(first, scheduler);
  first.await_grammar_bitmask();
  ASSERT_EQ(first.grammar_bitmask, expected.grammar_bitmask);
  std::fill(first.grammar_bitmask.begin(), first.grammar_bitmask.end(), 0xdeadbeefu);  // what a step may leave
  const uint32_t* words = first.grammar_bitmask.data();
  overlapped.RecycleBitmask(first);
  overlapped.FillBitmask(second, scheduler);
  second.await_grammar_bitmask();
  EXPECT_EQ(second.grammar_bitmask.data(), words) << "the recycled words, not a new vector";
  EXPECT_EQ(second.grammar_bitmask, expected.grammar_bitmask);
}

// A step's matchers advanced together on the mask threads (AcceptTokensOfStep, both
// pool kinds) end where one-by-one AcceptTokens leaves them: the same results (a
// refused token included), the same next masks, the same accepted-token count.
TEST(StructuredOutputEngineTest, MatchersAdvancedTogetherEqualOneByOne) {
  const Tokenizer tokenizer = Tokenizer::FromHfDirectory(std::string(VT_TEST_DATA_DIR) + "/openai_server/tokenizer");
  const int32_t vocab = tokenizer.vocab_size();
  const int64_t words = (vocab + 31) / 32;
  StructuredOutputManager serial(&tokenizer, {0}, vocab, "", 1, false, false);
  StructuredOutputManager sync(&tokenizer, {0}, vocab, "", 3, false, false);
  StructuredOutputManager overlapped(&tokenizer, {0}, vocab, "", 4, false, true);
  for (StructuredOutputManager* together : {&sync, &overlapped}) {
    std::vector<std::shared_ptr<StructuredOutputRequest>> one, all;
    std::vector<std::vector<int32_t>> tokens;
    for (int i = 0; i < 24; ++i) {
      const SamplingParams params = Constrained(i % 2 ? "[a-z]{5,20}-[0-9]{3,9}" : "(yes|no) [0-9]{2}", i);
      const std::vector<int32_t> prompt = tokenizer.Encode("p");
      one.push_back(serial.MakeRequest(params, prompt));
      all.push_back(together->MakeRequest(params, prompt));
      // Odd: letters the grammar takes; even: "yes" then, every fourth, "?" (refused).
      tokens.push_back(tokenizer.Encode(i % 2 ? "abcdef" : (i % 4 == 0 ? "yes?" : "yes 4")));
    }
    std::vector<StructuredOutputManager::AcceptItem> items;
    for (size_t i = 0; i < all.size(); ++i) items.emplace_back(all[i].get(), &tokens[i]);
    const int64_t before = together->stats().num_accepted_tokens, serial_before = serial.stats().num_accepted_tokens;
    const std::vector<bool> got = together->AcceptTokensOfStep(items);
    ASSERT_EQ(got.size(), all.size());
    int refused = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      EXPECT_EQ(got[i], serial.AcceptTokens(*one[i], tokens[i])) << "request " << i;
      refused += !got[i];
      if (!got[i]) continue;
      std::vector<uint32_t> a(words), b(words);
      one[i]->matcher.FillNextTokenBitmask(a);
      all[i]->matcher.FillNextTokenBitmask(b);
      EXPECT_EQ(a, b) << "request " << i;
    }
    EXPECT_EQ(refused, 6);
    EXPECT_EQ(together->stats().num_accepted_tokens - before, serial.stats().num_accepted_tokens - serial_before);
  }
}

TEST(StructuredOutputEngineTest, AGrammarThatEndsFinishesTheRequestUnderIgnoreEos) {
  LLMEngine engine(TestConfig());
  SamplingParams p = Constrained("(yes|no)", 1);
  p.ignore_eos = true;
  engine.AddRequest("r", engine.Encode("hi"), p);
  const RequestOutput out = RunAll(engine).at("r");
  EXPECT_TRUE(out.text == "yes" || out.text == "no") << out.text;
  EXPECT_EQ(out.finish_reason, "stop");
}

// The matchers' advance is host time between steps that no forward hides: the
// stats count every token a matcher took, and its time.
TEST(StructuredOutputEngineTest, StatsCountTheTokensTheMatchersAccepted) {
  LLMEngine engine(TestConfig());
  SamplingParams p = Constrained("[a-z]{40,60}", 3);
  p.max_tokens = 6;
  engine.AddRequest("r", engine.Encode("hi"), p);
  SamplingParams free_params;
  free_params.max_tokens = 4;
  engine.AddRequest("free", engine.Encode("hi"), free_params);  // no grammar: not counted
  const RequestOutput out = RunAll(engine).at("r");
  ASSERT_EQ(out.token_ids.size(), 6u) << out.text;
  const StructuredOutputStats stats = engine.stats().structured_outputs;
  EXPECT_EQ(stats.num_accepted_tokens, 5) << "the sixth token ends the request (max_tokens): no matcher to advance";
  EXPECT_GT(stats.accept_seconds, 0.0);
}

TEST(StructuredOutputEngineTest, BadGrammarsAreRefusedAtAdmission) {
  LLMEngine engine(TestConfig());
  SamplingParams p = Constrained("(unclosed", 1);
  EXPECT_THROW(engine.AddRequest("bad", engine.Encode("hi"), p), structured_output::StructuredOutputError);
  p.structured_outputs->choice = std::vector<std::string>{"a"};  // two constraints
  EXPECT_THROW(engine.AddRequest("two", engine.Encode("hi"), p), std::invalid_argument);
  EXPECT_FALSE(engine.HasUnfinishedRequests());
  EngineConfig config = TestConfig();
  config.reasoning_parser = "deepseek";
  EXPECT_THROW(LLMEngine{config}, std::invalid_argument);
}

}  // namespace
}  // namespace vllm
