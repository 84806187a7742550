#include "vllm/entrypoints/cli_args.h"

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

void CliArgs::Parse(const std::vector<std::string>& args) {
  size_t next_positional = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) {
      if (next_positional >= positional_order_.size()) {
        throw CliError(command_ + ": unexpected argument '" + arg + "'");
      }
      values_[positional_order_[next_positional++]] = arg;
      continue;
    }
    std::string name = arg.substr(2), value;
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
        continue;
      }
    }
    if (it == specs_.end() || it->second.is_positional) {
      throw CliError(command_ + ": unknown option --" + name + " (see `vllm-cpp " + command_ + " --help`)");
    }
    if (it->second.is_flag) {
      if (has_inline_value && value != "true" && value != "false") {
        throw CliError(command_ + ": --" + name + " takes no value or true/false, got '" + value + "'");
      }
      values_[name] = has_inline_value ? value : "true";
      continue;
    }
    if (!has_inline_value) {
      if (i + 1 >= args.size()) throw CliError(command_ + ": --" + name + " needs a value");
      value = args[++i];
    }
    values_[name] = value;
  }
  for (const std::string& name : positional_order_) {
    if (specs_[name].required && !values_.count(name)) {
      throw CliError(command_ + ": missing required argument " + name);
    }
  }
}

std::string CliArgs::Help() const {
  std::ostringstream out;
  out << "usage: vllm-cpp " << command_;
  for (const std::string& name : positional_order_) out << " " << name;
  out << " [options]\n";
  for (const std::string& name : declared_order_) {
    const Spec& spec = specs_.at(name);
    std::string shown = spec.is_positional ? name : (spec.is_flag ? "--[no-]" + name : "--" + name + " VALUE");
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
