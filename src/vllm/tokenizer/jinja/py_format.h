// Python's text forms of values: float repr, json.dumps (what transformers' tojson
// filter calls), printf-style `%` formatting and str.format, and the conversion of
// JSON input (messages, tools) into template values.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "value.h"

namespace vllm::jinja {

// repr(float): the shortest digits that round-trip, fixed notation when the decimal
// exponent is in [-4, 16), else 1.5e-10 / 1e+16; 'inf', '-inf', 'nan'.
std::string FloatRepr(double d);

// json.dumps(value, ensure_ascii=..., indent=..., separators=..., sort_keys=...).
// transformers registers tojson with ensure_ascii=False, indent=None, separators=None
// (", " and ": "), sort_keys=False. Throws RenderError for values JSON cannot hold.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // the text of one indent level; absent: one line
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
};
std::string JsonDumps(const Value& value, const JsonDumpOptions& options);

// Python `format % args` for str formats (%s %r %d %i %f %e %g %x %o %c %%, with
// flags, width and precision). `args` is a tuple (list), a dict, or one value.
std::string PercentFormat(const std::string& format, const Value& args);

// str.format with automatic or numbered fields ({} {0} {name}) and no format specs.
std::string BraceFormat(const std::string& format, const CallArgs& args);

// JSON input as template values: objects keep their key order (ordered_json).
// Nesting deeper than kMaxJsonDepth is refused (the renderer recurses on values).
inline constexpr int kMaxJsonDepth = 256;
Value FromJson(const nlohmann::ordered_json& json, int depth = 0);

}  // namespace vllm::jinja
