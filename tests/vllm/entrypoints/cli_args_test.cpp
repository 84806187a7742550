// vllm::CliArgs, the parser every vllm-cpp subcommand uses: values, vLLM's
// --flag / --no-flag pairs, positionals, and errors that name the subcommand and the
// option.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "vllm/entrypoints/cli_args.h"

namespace vllm {
namespace {

CliArgs ServeLikeArgs() {
  CliArgs cli("serve");
  cli.AddPositional("model", "HF folder or .gguf", true);
  cli.AddOption("port", "port to listen on", "8000");
  cli.AddOption("temperature", "sampling temperature", "1.0");
  cli.AddOption("max-model-len", "longest prompt + output (default: the model's)", "0");
  cli.AddOption("api-key", "bearer key");
  cli.AddFlag("enable-prefix-caching", "reuse KV blocks", true);
  cli.AddFlag("json", "print JSON lines");
  return cli;
}

std::string ErrorOf(const std::vector<std::string>& args) {
  CliArgs cli = ServeLikeArgs();
  try {
    cli.Parse(args);
  } catch (const CliError& e) {
    return e.what();
  }
  return "";
}

TEST(CliArgsTest, ValuesFlagsAndPositionals) {
  CliArgs cli = ServeLikeArgs();
  cli.Parse({"model_dir", "--port=9000", "--temperature", "0.5", "--no-enable-prefix-caching", "--json"});
  EXPECT_EQ(cli.GetString("model"), "model_dir");
  EXPECT_EQ(cli.GetInt("port"), 9000);
  EXPECT_DOUBLE_EQ(cli.GetDouble("temperature"), 0.5);
  EXPECT_FALSE(cli.GetFlag("enable-prefix-caching"));
  EXPECT_TRUE(cli.GetFlag("json"));
  EXPECT_TRUE(cli.WasGiven("port"));
  EXPECT_FALSE(cli.WasGiven("max-model-len"));
  EXPECT_EQ(cli.GetInt("max-model-len"), 0);  // the default
  EXPECT_FALSE(cli.Has("api-key"));
}

TEST(CliArgsTest, ErrorsNameTheCommandAndTheOption) {
  EXPECT_EQ(ErrorOf({"m", "--prot", "1"}), "serve: unknown option --prot (see `vllm-cpp serve --help`)");
  EXPECT_EQ(ErrorOf({"m", "--port"}), "serve: --port needs a value");
  EXPECT_EQ(ErrorOf({"m", "extra"}), "serve: unexpected argument 'extra'");
  EXPECT_EQ(ErrorOf({"--port", "1"}), "serve: missing required argument model");
  EXPECT_EQ(ErrorOf({"m", "--json=maybe"}), "serve: --json takes no value or true/false, got 'maybe'");
  EXPECT_EQ(ErrorOf({"m", "--no-port"}), "serve: unknown option --no-port (see `vllm-cpp serve --help`)");
}

TEST(CliArgsTest, NumbersAreCheckedWhenRead) {
  for (const char* bad : {"12x", "", "1e999", "nan", "inf", "-inf"}) {
    SCOPED_TRACE(bad);
    CliArgs cli = ServeLikeArgs();
    cli.Parse({"m", "--port", bad, "--temperature", bad});
    EXPECT_THROW(cli.GetInt("port"), CliError);
    try {
      cli.GetDouble("temperature");
      ADD_FAILURE() << "accepted --temperature " << bad;
    } catch (const CliError& e) {
      EXPECT_EQ(std::string(e.what()), std::string("serve: --temperature must be a finite number, got '") + bad + "'");
    }
  }
  CliArgs cli = ServeLikeArgs();
  cli.Parse({"m", "--port", "99999999999999999999"});
  EXPECT_THROW(cli.GetInt("port"), CliError);  // out of int64's range
}

TEST(CliArgsTest, HelpShowsDefaultsOnce) {
  const std::string help = ServeLikeArgs().Help();
  EXPECT_NE(help.find("port to listen on (default: 8000)"), std::string::npos) << help;
  EXPECT_NE(help.find("reuse KV blocks (default: on)"), std::string::npos) << help;
  // The option whose help explains its default does not also print the stored sentinel.
  EXPECT_NE(help.find("(default: the model's)\n"), std::string::npos) << help;
  EXPECT_EQ(help.find("(default: 0)"), std::string::npos) << help;
  EXPECT_NE(help.find("usage: vllm-cpp serve model [options]"), std::string::npos) << help;
}

TEST(CliArgsTest, ParseOrShowHelpPrintsTheHelpWhenAskedAndOtherwiseParses) {
  CliArgs cli = ServeLikeArgs();
  cli.AddFlag("help", "show this help");
  ::testing::internal::CaptureStdout();
  EXPECT_FALSE(cli.ParseOrShowHelp({"m", "--help"}));
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), cli.Help());
  CliArgs plain = ServeLikeArgs();
  plain.AddFlag("help", "show this help");
  ::testing::internal::CaptureStdout();
  EXPECT_TRUE(plain.ParseOrShowHelp({"m", "--port", "9"}));
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  EXPECT_EQ(plain.GetInt("port"), 9);
}

TEST(CliArgsTest, AFlagIsNeverTakenAsAValue) {
  EXPECT_EQ(ErrorOf({"m", "--api-key", "--port", "1"}),
            "serve: --api-key needs a value, got the option --port (write --api-key=VALUE for a value that starts "
            "with --)");
  CliArgs cli = ServeLikeArgs();
  cli.Parse({"m", "--api-key=--odd"});
  EXPECT_EQ(cli.GetString("api-key"), "--odd");
}

TEST(CliArgsTest, APositionalMayBeGivenAsAnOption) {
  CliArgs cli = ServeLikeArgs();
  cli.Parse({"--model", "dir", "--port", "1"});
  EXPECT_EQ(cli.GetString("model"), "dir");
  EXPECT_EQ(ErrorOf({"a", "--model", "b"}), "serve: model is given twice ('a' and --model)");
  EXPECT_EQ(ErrorOf({"--model", "a", "b"}), "serve: unexpected argument 'b'");
}

TEST(CliArgsTest, MultiValueOptionsTakeTheValuesUpToTheNextOption) {
  CliArgs cli("serve");
  cli.AddMultiOption("served-model-name", "names");
  cli.AddOption("port", "port", "8000");
  cli.Parse({"--served-model-name", "a", "b", "--port", "1"});
  EXPECT_EQ(cli.GetStrings("served-model-name"), std::vector<std::string>({"a", "b"}));
  EXPECT_EQ(cli.GetString("port"), "1");
  CliArgs none("serve");
  none.AddMultiOption("served-model-name", "names");
  none.Parse({});
  EXPECT_TRUE(none.GetStrings("served-model-name").empty());
  EXPECT_THROW(none.Parse({"--served-model-name"}), CliError);
}

TEST(CliArgsTest, SizesTakeVllmsSuffixes) {
  for (const auto& [text, value] : std::vector<std::pair<std::string, int64_t>>{
           {"4096", 4096}, {"32k", 32000}, {"32K", 32768}, {"25.6k", 25600}, {"1M", 1048576}, {"2g", 2000000000}}) {
    CliArgs cli = ServeLikeArgs();
    cli.Parse({"m", "--max-model-len", text});
    EXPECT_EQ(cli.GetHumanInt("max-model-len"), value) << text;
  }
  for (const char* bad : {"32x", "k", "1.5", "0.0001k", "1e999k"}) {
    CliArgs cli = ServeLikeArgs();
    cli.Parse({"m", "--max-model-len", bad});
    EXPECT_THROW(cli.GetHumanInt("max-model-len"), CliError) << bad;
  }
}

}  // namespace
}  // namespace vllm
