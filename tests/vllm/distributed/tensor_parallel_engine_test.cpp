// `--tensor-parallel-size` end to end (executor/multiproc_executor.h): an LLMEngine
// whose ranks 1..N-1 are real `vllm-cpp tensor-parallel-worker` processes gives the
// tokens of the one-rank engine, greedy and seeded sampling alike, with logprobs
// within f32 reduction-order tolerance; a worker that dies makes the next step fail
// with a message instead of hanging; bad sizes are refused naming the flag.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "vllm/distributed/gloo_communicator.h"
#include "vllm/engine/llm_engine.h"
#include "vllm/testing/engine_requests.h"
#include "vt/error.h"

namespace vllm {
namespace {

std::string ModelDir(const std::string& name) { return std::string(VT_TEST_DATA_DIR) + "/models/" + name; }

EngineConfig Config(const std::string& model, int64_t tp, bool expert_parallel = false) {
  EngineConfig c;
  c.enable_expert_parallel = expert_parallel;
  c.model = ModelDir(model) + "/hf";
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 24;  // prompts are chunked and share steps with decodes
  c.max_model_len = 256;
  c.block_size = 4;
  c.num_gpu_blocks_override = 256;
  c.state_snapshot_memory = 8 << 20;  // a few snapshots, not the default 0.5 GiB a rank
  c.num_threads = 1;
  c.tensor_parallel_size = tp;
  c.tensor_parallel_worker_program = VLLM_CPP_BINARY;
  c.on_log = [](const std::string&) {};
  return c;
}

std::map<std::string, RequestOutput> RunAll(LLMEngine& engine) { return testing::RunToCompletion(engine); }

// Three greedy requests and two seeded sampled ones with logprobs, all at once.
std::map<std::string, RequestOutput> Generate(const std::string& model, int64_t tp, bool expert_parallel = false) {
  LLMEngine engine(Config(model, tp, expert_parallel));
  const std::vector<std::vector<int32_t>> prompts = {{1, 5, 9, 2, 30, 7, 7, 3, 11, 4, 19, 60, 2, 8, 41, 3, 3, 9, 12, 5},
                                                     {3, 8},
                                                     {25},
                                                     {9, 9, 9, 1, 2, 3},
                                                     {44, 2, 17, 6}};
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams p;
    p.max_tokens = 12;
    p.ignore_eos = true;
    p.logprobs = 2;
    if (i < 3) {
      p.temperature = 0;
    } else {
      p.temperature = 0.8;
      p.seed = 100 + i;
    }
    engine.AddRequest("r" + std::to_string(i), prompts[i], p);
  }
  return RunAll(engine);
}

class TensorParallelEngineTest : public ::testing::TestWithParam<std::string> {};

void ExpectSameOutputs(const std::map<std::string, RequestOutput>& one,
                       const std::map<std::string, RequestOutput>& two) {
  ASSERT_EQ(one.size(), 5u);
  ASSERT_EQ(two.size(), 5u);
  for (const auto& [id, ref] : one) {
    const RequestOutput& got = two.at(id);
    EXPECT_EQ(got.token_ids, ref.token_ids) << id;
    ASSERT_EQ(got.logprobs.size(), ref.logprobs.size()) << id;
    for (size_t t = 0; t < ref.logprobs.size(); ++t) {
      ASSERT_FALSE(ref.logprobs[t].empty());
      EXPECT_EQ(got.logprobs[t][0].first, ref.logprobs[t][0].first) << id << " token " << t;
      EXPECT_NEAR(got.logprobs[t][0].second, ref.logprobs[t][0].second, 1e-4) << id << " token " << t;
    }
  }
}

TEST_P(TensorParallelEngineTest, TwoProcessesGiveTheTokensOfOne) {
  if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  ExpectSameOutputs(Generate(GetParam(), 1), Generate(GetParam(), 2));
}

// --enable-expert-parallel reaches the worker process (its rank holds experts 4..7
// whole): the same tokens and logprobs as one process.
TEST(TensorParallelEngineExpertParallelTest, TwoProcessesWithWholeExpertsGiveTheTokensOfOne) {
  if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  ExpectSameOutputs(Generate("qwen35_moe", 1), Generate("qwen35_moe", 2, true));
}

TEST(TensorParallelEngineExpertParallelTest, ExpertParallelWithoutRanksOrExpertsIsRefusedNamingTheFlag) {
  for (const auto& [model, tp] : {std::pair<std::string, int64_t>{"qwen35_moe", 1}, {"qwen3", 2}}) {
    try {
      LLMEngine engine(Config(model, tp, true));
      ADD_FAILURE() << "--enable-expert-parallel was accepted for " << model << " at --tensor-parallel-size " << tp;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("--enable-expert-parallel"), std::string::npos) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TensorParallelEngineTest, ::testing::Values("qwen35_moe", "qwen3"));

TEST(TensorParallelEngineFailureTest, AWorkerThatDiesFailsTheNextStepWithAMessage) {
  if (!GlooAvailable()) GTEST_SKIP() << "built without Gloo";
  const std::vector<pid_t> before = testing::ChildProcesses();
  LLMEngine engine(Config("qwen35_moe", 2));
  std::vector<pid_t> workers;
  for (pid_t pid : testing::ChildProcesses()) {
    if (std::find(before.begin(), before.end(), pid) == before.end()) workers.push_back(pid);
  }
  ASSERT_EQ(workers.size(), 1u);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 50;
  engine.AddRequest("a", {1, 2, 3}, p);
  engine.Step();
  ASSERT_EQ(kill(workers[0], SIGKILL), 0);
  ASSERT_TRUE(testing::WaitUntilExited(workers[0]));
  std::string error;
  try {
    for (int i = 0; i < 50 && engine.HasUnfinishedRequests(); ++i) engine.Step();
  } catch (const EngineDeadError& e) {
    error = e.what();
  }
  // The next step finds the worker gone before it sends anything (MultiprocExecutor::
  // CheckWorkers), instead of waiting in a collective with it.
  EXPECT_NE(error.find("rank 0 of 2"), std::string::npos) << "got: '" << error << "'";
  EXPECT_NE(error.find("the worker process of rank 1 (pid " + std::to_string(workers[0]) +
                       ") has exited (killed by signal 9)"),
            std::string::npos)
      << "got: '" << error << "'";
  EXPECT_THROW(engine.Step(), EngineDeadError) << "a dead engine stays dead";
}

TEST(TensorParallelEngineFailureTest, SizesThatCannotWorkAreRefusedNamingTheFlag) {
  for (int64_t tp : {0, -2, 65}) {
    try {
      LLMEngine engine(Config("qwen35_moe", tp));
      ADD_FAILURE() << "--tensor-parallel-size " << tp << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--tensor-parallel-size"), std::string::npos) << e.what();
    }
  }
  if (!GlooAvailable()) return;
  try {
    LLMEngine engine(Config("qwen35_causallm", 4));  // 2 GDN key heads over 4 ranks
    ADD_FAILURE() << "4 ranks over 2 key heads were accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("linear_num_key_heads (2) is not divisible by --tensor-parallel-size 4"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vllm
