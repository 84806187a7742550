// What LLMEngine checks and reports while it starts: a tokenizer (or EOS ids)
// that does not fit the model's vocabulary is refused at construction, naming both
// sizes; the cache sizing is logged in one line with the figures it chose, the
// prefix caching choice comes with its reason, and a graph capture size where no
// graphs run is refused.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "vllm/engine/llm_engine.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm {
namespace {

using testing::DenseConfig;
using testing::DenseDims;
using testing::TempDir;
using testing::WriteHfFolder;

EngineConfig SmallConfig(const std::string& model) {
  EngineConfig c;
  c.model = model;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 64;
  c.block_size = 4;
  c.cpu_kv_cache_bytes = 1 << 20;
  c.num_threads = 1;
  return c;
}

// The fixtures' tiny tokenizer is not a loadable byte-level one; these engines take ids.
const testing::HfFolderOptions kNoTokenizer{.dtype = vt::DType::kF32, .with_tokenizer = false};

std::string ConstructionError(const EngineConfig& config) {
  try {
    LLMEngine engine(config);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// The server tests' tokenizer (tests/data/openai_server/tokenizer) has 324 ids:
// it fits a model of 352 ids and not one of 320.
TEST(EngineStartupTest, ATokenizerLargerThanTheVocabularyIsRefused) {
  const std::string tokenizer = std::string(VT_TEST_DATA_DIR) + "/openai_server/tokenizer";
  TempDir fits, too_small;
  WriteHfFolder(fits.path(), DenseConfig(DenseDims{.vocab_size = 352}), kNoTokenizer);
  WriteHfFolder(too_small.path(), DenseConfig(DenseDims{.vocab_size = 320}), kNoTokenizer);
  EngineConfig config = SmallConfig(fits.path());
  config.tokenizer = tokenizer;
  EXPECT_EQ(ConstructionError(config), "");
  config.model = too_small.path();
  const std::string error = ConstructionError(config);
  EXPECT_NE(error.find("has 324 token ids"), std::string::npos) << error;
  EXPECT_NE(error.find("vocabulary of 320"), std::string::npos) << error;
  EXPECT_NE(error.find(tokenizer), std::string::npos) << error;
  EXPECT_NE(error.find(too_small.path()), std::string::npos) << error;
}

// --max-cudagraph-capture-size caps the decode graphs; where none run (the CPU, or
// --enforce-eager) it would be ignored, so it is refused naming why.
TEST(EngineStartupTest, AGraphCaptureSizeWhereNoGraphsRunIsRefused) {
  TempDir model;
  WriteHfFolder(model.path(), DenseConfig(DenseDims{.vocab_size = 352}), kNoTokenizer);
  EngineConfig config = SmallConfig(model.path());
  EXPECT_EQ(ConstructionError(config), "");
  config.max_cudagraph_capture_size = 8;
  std::string error = ConstructionError(config);
  EXPECT_NE(error.find("--max-cudagraph-capture-size is given, but no decode graphs run here"), std::string::npos)
      << error;
  EXPECT_NE(error.find("cpu has no device graphs"), std::string::npos) << error;
  config.max_cudagraph_capture_size = 0;
  error = ConstructionError(config);
  EXPECT_NE(error.find("--max-cudagraph-capture-size must be >= 1, got 0"), std::string::npos) << error;
}

TEST(EngineStartupTest, AnEosIdOutsideTheVocabularyIsRefused) {
  TempDir model;
  ModelConfig c = DenseConfig(DenseDims{.vocab_size = 32});
  c.eos_token_ids = {40};
  WriteHfFolder(model.path(), c, kNoTokenizer);
  const std::string error = ConstructionError(SmallConfig(model.path()));
  EXPECT_NE(error.find("eos_token_id 40"), std::string::npos) << error;
  EXPECT_NE(error.find("vocabulary of 32"), std::string::npos) << error;
}

// On the CPU the budget is explicit (nothing is profiled); the line gives what it
// bought: 1 MiB holds 512 blocks of 2 layers x (K, V) x 4 tokens x 1 head x 32 x
// 4 bytes, of which max_num_seqs x 64 / 4 + 1 = 65 are wanted.
TEST(EngineStartupTest, TheCacheSizingIsLoggedInOneLine) {
  TempDir model;
  WriteHfFolder(model.path(), DenseConfig(DenseDims{.vocab_size = 32}), kNoTokenizer);
  EngineConfig config = SmallConfig(model.path());
  std::vector<std::string> lines;
  config.on_log = [&](const std::string& line) { lines.push_back(line); };
  LLMEngine engine(config);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(engine.cache_plan().num_blocks, 65);
  EXPECT_EQ(lines[0].rfind("KV cache on cpu: 0.00 GiB, 256 tokens (64 blocks of 4); maximum concurrency at "
                           "max_model_len 64: 4.00x; weights ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("activation peak not profiled on cpu; budget 0.00 GiB (explicit)"), std::string::npos)
      << lines[0];
}

// A hybrid model shares pages between prompts with snapshots of its recurrent
// state, which the cache line counts; with no memory for a single snapshot, asking
// for prefix caching says why it is off instead of passing silently.
TEST(EngineStartupTest, PrefixCachingOnAHybridModelNeedsRoomForStateSnapshots) {
  TempDir model;
  WriteHfFolder(model.path(), DenseConfig(DenseDims{.vocab_size = 32, .layer_types = {testing::kLinear,
                                                                                       testing::kFull}}),
                kNoTokenizer);
  EngineConfig config = SmallConfig(model.path());
  std::vector<std::string> lines;
  config.on_log = [&](const std::string& line) { lines.push_back(line); };
  config.enable_prefix_caching = true;
  {
    LLMEngine engine(config);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("state snapshots"), std::string::npos) << lines[0];
    EXPECT_TRUE(engine.prefix_caching_enabled());
    EXPECT_GT(engine.stats().num_state_snapshots, 0);
  }
  lines.clear();
  config.state_snapshot_memory = 1;
  LLMEngine engine(config);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].rfind("prefix caching is off (no memory left for a Gated DeltaNet state snapshot", 0), 0u)
      << lines[1];
  EXPECT_FALSE(engine.prefix_caching_enabled());
  EXPECT_EQ("prefix caching is " + engine.prefix_caching_reason(), lines[1]);
}

// The engine says whether prefix caching is on and why (for the startup line).
TEST(EngineStartupTest, ThePrefixCachingChoiceIsExplained) {
  TempDir dense, hybrid;
  WriteHfFolder(dense.path(), DenseConfig(DenseDims{.vocab_size = 32}), kNoTokenizer);
  WriteHfFolder(hybrid.path(),
                DenseConfig(DenseDims{.vocab_size = 32, .layer_types = {testing::kLinear, testing::kFull}}),
                kNoTokenizer);
  struct Case {
    const std::string* model;
    std::optional<bool> asked;
    bool enabled;
    std::string reason;
  };
  const std::string hybrid_reason =
      "; hybrid model: Gated DeltaNet state snapshots every 512 tokens and at the ends of prompts and answers, ";
  for (const Case& c : {Case{&dense.path(), std::nullopt, true, "on (the default for attention-only models)"},
                        Case{&dense.path(), true, true, "on (--enable-prefix-caching)"},
                        Case{&dense.path(), false, false, "off (--no-enable-prefix-caching)"},
                        Case{&hybrid.path(), std::nullopt, true, "on (the default" + hybrid_reason},
                        Case{&hybrid.path(), true, true, "on (--enable-prefix-caching" + hybrid_reason},
                        Case{&hybrid.path(), false, false, "off (--no-enable-prefix-caching)"}}) {
    EngineConfig config = SmallConfig(*c.model);
    config.enable_prefix_caching = c.asked;
    config.on_log = [](const std::string&) {};
    const LLMEngine engine(config);
    EXPECT_EQ(engine.prefix_caching_enabled(), c.enabled) << c.reason;
    EXPECT_EQ(engine.prefix_caching_reason().substr(0, c.reason.size()), c.reason);
  }
}

}  // namespace
}  // namespace vllm
