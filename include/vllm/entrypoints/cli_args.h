// A small command-line parser shared by the vllm-cpp subcommands.
//
// Options are declared with their help text and default; Parse() rejects unknown
// options and missing values with an error that names the option and the
// subcommand. Boolean flags accept vLLM's "--flag / --no-flag" pairs. A value never
// starts with "--" unless given inline (--api-key=--odd): `--api-key --port 1` is an
// error, not the key "--port". A positional may also be given as an option
// (`serve --model M` as `serve M`, as vLLM).
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace vllm {

class CliError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CliArgs {
 public:
  explicit CliArgs(std::string command) : command_(std::move(command)) {}

  // --name VALUE (or --name=VALUE); `fallback` empty means "no default".
  void AddOption(const std::string& name, const std::string& help, std::optional<std::string> fallback = {});
  // --name (true) and --no-name (false).
  void AddFlag(const std::string& name, const std::string& help, bool fallback = false);
  // --name V1 V2 ... (vLLM's nargs="+"): the values up to the next option.
  void AddMultiOption(const std::string& name, const std::string& help);
  // Positional arguments are collected in order (e.g. `serve MODEL`).
  void AddPositional(const std::string& name, const std::string& help, bool required);

  void Parse(const std::vector<std::string>& args);
  // Parse, then, when the declared "help" flag was given, prints Help() to stdout
  // and returns false (the caller stops there); true otherwise.
  bool ParseOrShowHelp(const std::vector<std::string>& args);
  std::string Help() const;

  bool Has(const std::string& name) const;  // given or has a default
  std::string GetString(const std::string& name) const;
  int64_t GetInt(const std::string& name) const;
  // An integer with an optional size suffix, as vLLM's human_readable_int: k m g t
  // are powers of 1000 and K M G T of 1024, and may follow a decimal
  // (32k = 32000, 32K = 32768, 25.6k = 25600); the result must be whole.
  int64_t GetHumanInt(const std::string& name) const;
  // The values of a multi-value option (empty when not given).
  std::vector<std::string> GetStrings(const std::string& name) const;
  double GetDouble(const std::string& name) const;
  bool GetFlag(const std::string& name) const;
  bool WasGiven(const std::string& name) const;
  std::vector<std::string> GivenNames() const;  // options, flags and positionals given, by name

 private:
  struct Spec {
    std::string help;
    std::optional<std::string> fallback;
    bool is_flag = false;
    bool is_positional = false;
    bool required = false;
    bool is_multi = false;
  };
  // Parses the option at args[i] (advancing i past its values).
  void ParseOption(const std::vector<std::string>& args, size_t& i);
  const Spec& Find(const std::string& name) const;

  std::string command_;
  std::map<std::string, Spec> specs_;
  std::vector<std::string> positional_order_;
  std::vector<std::string> declared_order_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> multi_values_;
};

}  // namespace vllm
