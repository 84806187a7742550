#include "py_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "py_string.h"

namespace vllm::jinja {
namespace {

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  auto append_u = [&](unsigned unit) {
    out += "\\u";
    for (int d = 3; d >= 0; --d) out.push_back(kHex[(unit >> (4 * d)) & 0xF]);
  };
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const auto byte = static_cast<unsigned char>(s[i]);
    if (byte >= 0x80) {
      const size_t start = i;
      const char32_t cp = py::NextCodePoint(s, i);
      if (!ensure_ascii) {
        out.append(s.substr(start, i - start));
      } else if (cp >= 0x10000) {
        append_u(0xD800 + ((cp - 0x10000) >> 10));
        append_u(0xDC00 + ((cp - 0x10000) & 0x3FF));
      } else {
        append_u(cp);
      }
      continue;
    }
    switch (byte) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (byte < 0x20 || (ensure_ascii && byte == 0x7F)) {
          append_u(byte);
        } else {
          out.push_back(static_cast<char>(byte));
        }
    }
    ++i;
  }
  out.push_back('"');
}

std::string JsonFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return FloatRepr(d);
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonDumpOptions& options) : options_(options) {
    const bool pretty = options.indent.has_value();
    item_separator_ = options.separators ? options.separators->first : pretty ? "," : ", ";
    key_separator_ = options.separators ? options.separators->second : ": ";
  }

  void Write(const Value& value, int level, std::string& out) {
    switch (value.kind()) {
      case Value::Kind::kNone: out += "null"; return;
      case Value::Kind::kBool: out += value.AsBool() ? "true" : "false"; return;
      case Value::Kind::kInt: out += IntToString(value.AsInt()); return;
      case Value::Kind::kFloat: out += JsonFloat(value.AsFloat()); return;
      case Value::Kind::kString: AppendJsonString(value.AsString(), options_.ensure_ascii, out); return;
      case Value::Kind::kList: WriteList(value.AsList(), level, out); return;
      case Value::Kind::kDict: WriteDict(value.AsDict(), level, out); return;
      default: throw RenderError("Object of type " + value.TypeName() + " is not JSON serializable");
    }
  }

 private:
  void NewLine(int level, std::string& out) const {
    if (!options_.indent) return;
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += *options_.indent;
  }

  static void CheckSize(const std::string& out) {
    if (out.size() > kMaxValueSize) throw RenderError("tojson result exceeds " + std::to_string(kMaxValueSize) + " bytes");
  }

  void WriteList(const ValueList& items, int level, std::string& out) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_separator_;
      NewLine(level + 1, out);
      Write(items[i], level + 1, out);
      CheckSize(out);
    }
    NewLine(level, out);
    out.push_back(']');
  }

  void WriteDict(const ValueDict& dict, int level, std::string& out) {
    if (dict.size() == 0) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& entry : dict.items()) entries.push_back(&entry);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
    }
    out.push_back('{');
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out += item_separator_;
      NewLine(level + 1, out);
      AppendJsonString(entries[i]->first, options_.ensure_ascii, out);
      out += key_separator_;
      Write(entries[i]->second, level + 1, out);
      CheckSize(out);
    }
    NewLine(level, out);
    out.push_back('}');
  }

  const JsonDumpOptions& options_;
  std::string item_separator_;
  std::string key_separator_;
};

// One %-conversion: %[(key)][flags][width][.precision]type.
struct PercentSpec {
  std::optional<std::string> key;
  std::string flags;
  int width = 0;
  int precision = -1;
  char type = 's';
};

std::string Pad(std::string body, const PercentSpec& spec, bool numeric) {
  const size_t width = static_cast<size_t>(spec.width);
  const size_t length = py::CodePointCount(body);
  if (length >= width) return body;
  const size_t fill = width - length;
  if (spec.flags.find('-') != std::string::npos) return body + std::string(fill, ' ');
  if (numeric && spec.flags.find('0') != std::string::npos) {
    const size_t sign = (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) ? 1 : 0;
    return body.substr(0, sign) + std::string(fill, '0') + body.substr(sign);
  }
  return std::string(fill, ' ') + body;
}

std::string FormatNumber(const Value& arg, const PercentSpec& spec) {
  if (!arg.IsNumber()) {
    throw RenderError(std::string("%") + spec.type + " format: a real number is required, not " + arg.TypeName());
  }
  const bool plus = spec.flags.find('+') != std::string::npos;
  const bool space = spec.flags.find(' ') != std::string::npos;
  std::string sign_prefix = plus ? "+" : space ? " " : "";
  if (spec.type == 'd' || spec.type == 'i' || spec.type == 'u') {
    if (arg.IsFloat() && !(std::fabs(arg.AsFloat()) < 1e38)) {
      throw RenderError(std::string("%") + spec.type + " format: cannot convert " + FloatRepr(arg.AsFloat()) + " to an integer");
    }
    const Int i = arg.IsFloat() ? static_cast<Int>(std::trunc(arg.AsFloat())) : arg.AsInt();
    return Pad((i >= 0 ? sign_prefix : "") + IntToString(i), spec, true);
  }
  if (spec.type == 'x' || spec.type == 'X' || spec.type == 'o') {
    if (arg.IsFloat()) throw RenderError(std::string("%") + spec.type + " format: an integer is required, not float");
    const Int i = arg.AsInt();
    const unsigned base = spec.type == 'o' ? 8 : 16;
    const char* digits = spec.type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
    Int n = i < 0 ? -i : i;
    std::string text;
    do {
      text.push_back(digits[static_cast<int>(n % base)]);
      n /= base;
    } while (n != 0);
    std::reverse(text.begin(), text.end());
    if (spec.flags.find('#') != std::string::npos) text = (spec.type == 'o' ? "0o" : spec.type == 'X' ? "0X" : "0x") + text;
    return Pad((i < 0 ? "-" : sign_prefix) + text, spec, true);
  }
  char format[16];
  std::snprintf(format, sizeof(format), "%%%s.%d%c", sign_prefix.c_str(), spec.precision < 0 ? 6 : spec.precision,
                spec.type);
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer), format, arg.AsFloat());
  return Pad(buffer, spec, true);
}

std::string FormatOne(const Value& arg, const PercentSpec& spec) {
  switch (spec.type) {
    case 's':
    case 'r':
    case 'a': {
      std::string text = spec.type == 's' ? ToStr(arg) : Repr(arg);
      if (spec.precision >= 0) text = py::EncodeUtf8(py::DecodeUtf8(text).substr(0, spec.precision));
      return Pad(text, spec, false);
    }
    case 'c': {
      if (arg.IsString() && py::CodePointCount(arg.AsString()) == 1) return Pad(arg.AsString(), spec, false);
      if (!arg.IsInt() || arg.AsInt() < 0 || arg.AsInt() > 0x10FFFF) throw RenderError("%c requires int or char");
      if (arg.AsInt() >= 0xD800 && arg.AsInt() <= 0xDFFF) {
        throw RenderError("%c of " + std::to_string(static_cast<long long>(arg.AsInt())) +
                          ", a surrogate code point (U+D800..U+DFFF), which has no UTF-8 form");
      }
      std::string text;
      py::AppendUtf8(static_cast<char32_t>(arg.AsInt()), text);
      return Pad(text, spec, false);
    }
    case 'd': case 'i': case 'u': case 'x': case 'X': case 'o':
    case 'f': case 'F': case 'e': case 'E': case 'g': case 'G':
      return FormatNumber(arg, spec);
    default:
      throw RenderError(std::string("unsupported format character '") + spec.type + "'");
  }
}

// Parses the conversion after '%' at `i` (which is advanced past it).
PercentSpec ParsePercentSpec(const std::string& format, size_t& i) {
  PercentSpec spec;
  auto at_end = [&] { return i >= format.size(); };
  if (!at_end() && format[i] == '(') {
    const size_t close = format.find(')', i);
    if (close == std::string::npos) throw RenderError("incomplete format key");
    spec.key = format.substr(i + 1, close - i - 1);
    i = close + 1;
  }
  while (!at_end() && std::string_view("-+ #0").find(format[i]) != std::string_view::npos) spec.flags += format[i++];
  // Digits of the width or precision, refused past kMaxFormatWidth (before they can overflow).
  auto read_number = [&] {
    constexpr int kMaxFormatWidth = 4096;
    int value = 0;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(format[i]))) {
      value = value * 10 + (format[i++] - '0');
      if (value > kMaxFormatWidth) throw RenderError("format width or precision too large");
    }
    return value;
  };
  spec.width = read_number();
  if (!at_end() && format[i] == '.') {
    ++i;
    spec.precision = read_number();
  }
  if (at_end()) throw RenderError("incomplete format");
  spec.type = format[i++];
  return spec;
}

}  // namespace

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), d, std::chars_format::scientific);
  const std::string_view text(buffer, static_cast<size_t>(result.ptr - buffer));
  // text is [-]D[.DDD]e(+|-)XX: split into sign, significant digits and exponent.
  const size_t e_pos = text.find('e');
  std::string_view mantissa = text.substr(0, e_pos);
  const int exponent = std::stoi(std::string(text.substr(e_pos + 1)));
  std::string sign;
  if (mantissa.front() == '-') {
    sign = "-";
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  if (exponent < -4 || exponent >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_text[16];
    std::snprintf(exp_text, sizeof(exp_text), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp_text;
  }
  if (exponent < 0) return sign + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  const size_t int_digits = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= int_digits) return sign + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return sign + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

std::string JsonDumps(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  JsonWriter(options).Write(value, 0, out);
  return out;
}

std::string PercentFormat(const std::string& format, const Value& args) {
  const bool is_tuple = args.IsList() && args.IsTuple();
  const ValueList single{args};
  const ValueList& positional = is_tuple ? args.AsList() : single;
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size();) {
    if (format[i] != '%') {
      out.push_back(format[i++]);
      continue;
    }
    ++i;
    if (i < format.size() && format[i] == '%') {
      out.push_back('%');
      ++i;
      continue;
    }
    const PercentSpec spec = ParsePercentSpec(format, i);
    if (spec.key) {
      if (!args.IsDict()) throw RenderError("format requires a mapping");
      const Value* value = args.AsDict().Find(*spec.key);
      if (value == nullptr) throw RenderError("KeyError: " + py::Repr(*spec.key));
      out += FormatOne(*value, spec);
      continue;
    }
    if (next >= positional.size()) throw RenderError("not enough arguments for format string");
    out += FormatOne(positional[next++], spec);
    if (out.size() > kMaxValueSize) throw RenderError("%-format result too large");
  }
  if (next < positional.size() && !args.IsDict()) {
    throw RenderError("not all arguments converted during string formatting");
  }
  return out;
}

std::string BraceFormat(const std::string& format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if ((c == '{' || c == '}') && i + 1 < format.size() && format[i + 1] == c) {
      out.push_back(c);
      ++i;
      continue;
    }
    if (c == '}') throw RenderError("Single '}' encountered in format string");
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string::npos) throw RenderError("Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close;
    bool use_repr = false;
    if (field.size() >= 2 && field[field.size() - 2] == '!') {
      use_repr = field.back() == 'r' || field.back() == 'a';
      field.resize(field.size() - 2);
    }
    if (field.find_first_of(":.[") != std::string::npos) {
      throw RenderError("str.format: format specs and field attributes are not supported ('{" + field + "}')");
    }
    const Value* value = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return std::isdigit(static_cast<unsigned char>(d)); })) {
      const size_t index = field.empty() ? auto_index++ : field.size() > 9 ? args.positional.size() : std::stoul(field);
      if (index >= args.positional.size()) throw RenderError("Replacement index " + std::to_string(index) + " out of range");
      value = &args.positional[index];
    } else {
      for (const auto& [name, v] : args.keyword) {
        if (name == field) value = &v;
      }
      if (value == nullptr) throw RenderError("KeyError: " + py::Repr(field));
    }
    out += use_repr ? Repr(*value) : ToStr(*value);
    if (out.size() > kMaxValueSize) throw RenderError("str.format result too large");
  }
  return out;
}

Value FromJson(const nlohmann::ordered_json& json, int depth) {
  if (depth > kMaxJsonDepth) {
    throw RenderError("JSON input nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::None();
    case nlohmann::ordered_json::value_t::boolean: return Value::Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::Integer(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Value::Integer(json.get<uint64_t>());
    case nlohmann::ordered_json::value_t::number_float: return Value::Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::String(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(FromJson(item, depth + 1));
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueDict dict;
      for (const auto& [key, item] : json.items()) dict.Set(key, FromJson(item, depth + 1));
      return Value::Dict(std::move(dict));
    }
    default: throw RenderError("JSON input holds a value of type '" + std::string(json.type_name()) + "'");
  }
}

}  // namespace vllm::jinja
