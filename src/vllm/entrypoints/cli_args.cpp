#include "vllm/entrypoints/cli_args.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace vllm {

void CliArgs::AddOption(const std::string& name, const std::string& help, std::optional<std::string> fallback) {
  specs_[name] = Spec{help, std::move(fallback), false, false, false};
  declared_order_.push_back(name);
}

void CliArgs::AddFlag(const std::string& name, const std::string& help, bool fallback) {
  specs_[name] = Spec{help, std::string(fallback ? "true" : "false"), true, false, false};
  declared_order_.push_back(name);
}

void CliArgs::AddMultiOption(const std::string& name, const std::string& help) {
  specs_[name] = Spec{help, std::nullopt, false, false, false, true};
  declared_order_.push_back(name);
}

void CliArgs::AddPositional(const std::string& name, const std::string& help, bool required) {
  specs_[name] = Spec{help, std::nullopt, false, true, required};
  positional_order_.push_back(name);
  declared_order_.push_back(name);
}

bool CliArgs::ParseOrShowHelp(const std::vector<std::string>& args) {
  Parse(args);
  if (!GetFlag("help")) return true;
  std::printf("%s", Help().c_str());
  return false;
}

namespace {

bool IsOption(const std::string& arg) { return arg.rfind("--", 0) == 0; }

}  // namespace

void CliArgs::Parse(const std::vector<std::string>& args) {
  size_t next_positional = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (IsOption(arg)) {
      ParseOption(args, i);
      continue;
    }
    while (next_positional < positional_order_.size() && values_.count(positional_order_[next_positional])) {
      ++next_positional;  // given as --name already
    }
    if (next_positional >= positional_order_.size()) {
      throw CliError(command_ + ": unexpected argument '" + arg + "'");
    }
    values_[positional_order_[next_positional++]] = arg;
  }
  for (const std::string& name : positional_order_) {
    if (specs_[name].required && !values_.count(name)) {
      throw CliError(command_ + ": missing required argument " + name);
    }
  }
}

void CliArgs::ParseOption(const std::vector<std::string>& args, size_t& i) {
  std::string name = args[i].substr(2), value;
  bool has_inline_value = false;
  if (auto eq = name.find('='); eq != std::string::npos) {
    value = name.substr(eq + 1);
    name = name.substr(0, eq);
    has_inline_value = true;
  }
  auto it = specs_.find(name);
  if (it == specs_.end() && name.rfind("no-", 0) == 0) {
    auto flag = specs_.find(name.substr(3));
    if (flag != specs_.end() && flag->second.is_flag && !has_inline_value) {
      values_[flag->first] = "false";
      return;
    }
  }
  if (it == specs_.end()) {
    throw CliError(command_ + ": unknown option --" + name + " (see `vllm-cpp " + command_ + " --help`)");
  }
  const Spec& spec = it->second;
  if (spec.is_flag) {
    if (has_inline_value && value != "true" && value != "false") {
      throw CliError(command_ + ": --" + name + " takes no value or true/false, got '" + value + "'");
    }
    values_[name] = has_inline_value ? value : "true";
    return;
  }
  if (spec.is_positional && values_.count(name)) {
    throw CliError(command_ + ": " + name + " is given twice ('" + values_[name] + "' and --" + name + ")");
  }
  if (spec.is_multi) {
    std::vector<std::string>& values = multi_values_[name];
    values.clear();
    if (has_inline_value) values.push_back(value);
    while (!has_inline_value && i + 1 < args.size() && !IsOption(args[i + 1])) values.push_back(args[++i]);
    if (values.empty()) throw CliError(command_ + ": --" + name + " needs at least one value");
    values_[name] = values.front();
    return;
  }
  if (!has_inline_value) {
    if (i + 1 >= args.size()) throw CliError(command_ + ": --" + name + " needs a value");
    if (IsOption(args[i + 1])) {
      throw CliError(command_ + ": --" + name + " needs a value, got the option " + args[i + 1] +
                     " (write --" + name + "=VALUE for a value that starts with --)");
    }
    value = args[++i];
  }
  values_[name] = value;
}

std::string CliArgs::Help() const {
  std::ostringstream out;
  out << "usage: vllm-cpp " << command_;
  for (const std::string& name : positional_order_) out << " " << name;
  out << " [options]\n";
  for (const std::string& name : declared_order_) {
    const Spec& spec = specs_.at(name);
    std::string shown = spec.is_positional ? name + " (or --" + name + " VALUE)"
                        : spec.is_flag     ? "--[no-]" + name
                        : spec.is_multi    ? "--" + name + " VALUE [VALUE ...]"
                                           : "--" + name + " VALUE";
    out << "  " << shown << "\n      " << spec.help;
    // A help text that explains its own default ("default: the model's") says it better
    // than the sentinel value the option stores.
    const bool help_names_default = spec.help.find("(default: ") != std::string::npos;
    if (spec.fallback && !spec.is_flag && !help_names_default) out << " (default: " << *spec.fallback << ")";
    if (spec.is_flag && spec.fallback == std::string("true")) out << " (default: on)";
    out << "\n";
  }
  return out.str();
}

const CliArgs::Spec& CliArgs::Find(const std::string& name) const {
  auto it = specs_.find(name);
  if (it == specs_.end()) throw std::logic_error("CliArgs: option '" + name + "' was never declared");
  return it->second;
}

bool CliArgs::Has(const std::string& name) const { return values_.count(name) || Find(name).fallback.has_value(); }
bool CliArgs::WasGiven(const std::string& name) const { return values_.count(name) > 0; }

std::vector<std::string> CliArgs::GivenNames() const {
  std::vector<std::string> names;
  for (const auto& [name, value] : values_) names.push_back(name);
  for (const auto& [name, values] : multi_values_) names.push_back(name);
  return names;
}

std::string CliArgs::GetString(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  const Spec& spec = Find(name);
  if (!spec.fallback) throw CliError(command_ + ": missing required option --" + name);
  return *spec.fallback;
}

int64_t CliArgs::GetInt(const std::string& name) const {
  std::string text = GetString(name);
  try {
    size_t used = 0;
    int64_t value = std::stoll(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw CliError(command_ + ": --" + name + " must be an integer, got '" + text + "'");
}

int64_t CliArgs::GetHumanInt(const std::string& name) const {
  const std::string text = GetString(name);
  static constexpr std::pair<char, double> kSuffixes[] = {{'k', 1e3},  {'m', 1e6},          {'g', 1e9},
                                                          {'t', 1e12}, {'K', 1024.0},       {'M', 1048576.0},
                                                          {'G', 1073741824.0}, {'T', 1099511627776.0}};
  const auto suffix = std::find_if(std::begin(kSuffixes), std::end(kSuffixes),
                                   [&](const auto& s) { return !text.empty() && text.back() == s.first; });
  if (suffix == std::end(kSuffixes)) return GetInt(name);
  const std::string number = text.substr(0, text.size() - 1);
  try {
    size_t used = 0;
    const double value = std::stod(number, &used) * suffix->second;
    if (used == number.size() && !number.empty() && std::isfinite(value) && value == std::floor(value) &&
        std::fabs(value) < 9.2e18) {
      return static_cast<int64_t>(value);
    }
  } catch (const std::exception&) {
  }
  throw CliError(command_ + ": --" + name + " must be an integer or a size like 32k (1000s) or 32K (1024s), got '" +
                 text + "'");
}

std::vector<std::string> CliArgs::GetStrings(const std::string& name) const {
  Find(name);
  auto it = multi_values_.find(name);
  return it == multi_values_.end() ? std::vector<std::string>{} : it->second;
}

double CliArgs::GetDouble(const std::string& name) const {
  std::string text = GetString(name);
  try {
    size_t used = 0;
    double value = std::stod(text, &used);
    if (used == text.size() && std::isfinite(value)) return value;
  } catch (const std::exception&) {
  }
  throw CliError(command_ + ": --" + name + " must be a finite number, got '" + text + "'");
}

bool CliArgs::GetFlag(const std::string& name) const { return GetString(name) == "true"; }

}  // namespace vllm
