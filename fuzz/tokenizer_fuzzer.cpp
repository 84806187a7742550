// libFuzzer target: arbitrary bytes through the tokenizer and back.
//
// Two byte-level BPE tokenizers with Qwen's split pattern: one without a normalizer
// and with added tokens (special and not), which must give back exactly the text it
// was given, and one with NFC, which must give back the NFC form (from utf8proc). Text
// that is not UTF-8 must be refused with vt::Error. The input's bytes read as token
// ids must decode or be refused with vt::Error. Anything else is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nfc_reference.h"
#include "tiny_tokenizer.h"
#include "tokenizer/utf8.h"
#include "vllm/tokenizer/tokenizer.h"
#include "vt/error.h"

namespace {

[[noreturn]] void Finding(const std::string& what) {
  std::fprintf(stderr, "tokenizer_fuzzer: %s\n", what.c_str());
  std::abort();
}

vllm::Tokenizer Build(bool nfc) {
  vllm::testing::TinyTokenizerJson json;
  json.merges = {{"a", "b"}, {"ab", "c"}, {" ", "a"}, {" ", "t"}, {"t", "h"}, {" t", "h"}, {"\xC3", "\xA9"},
                 {"\n", "\n"}, {" ", " "}, {"  ", "  "}, {"1", "2"}, {"\xE4", "\xBD"}, {"\xE4\xBD", "\xA0"}};
  if (nfc) return vllm::Tokenizer::FromHfJson(json.ToJson().dump(), "", "fuzz-nfc");
  json.normalizer = nullptr;
  json.AddToken("<|im_start|>", true);
  json.AddToken("<|im_end|>", true);
  json.AddToken("<think>", false);
  return vllm::Tokenizer::FromHfJson(json.ToJson().dump(), "", "fuzz-plain");
}

// Encodes `text` and decodes it back; `expected` is what must come back for UTF-8.
void RoundTrip(const vllm::Tokenizer& tokenizer, const std::string& text, const std::string& expected) {
  const bool valid = !vllm::utf8::FindInvalid(text).has_value();
  std::vector<int32_t> ids;
  try {
    ids = tokenizer.Encode(text, false);
  } catch (const vt::Error& e) {
    if (valid) Finding(tokenizer.source() + ": valid UTF-8 refused: " + e.what());
    return;
  }
  if (!valid) Finding(tokenizer.source() + ": text that is not UTF-8 was encoded");
  for (int32_t id : ids) {
    if (!tokenizer.HasToken(id)) Finding(tokenizer.source() + ": encoded to id " + std::to_string(id));
  }
  if (tokenizer.Decode(ids) != expected) Finding(tokenizer.source() + ": decode(encode(text)) differs from the text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const vllm::Tokenizer plain = Build(false);
  static const vllm::Tokenizer nfc = Build(true);
  const std::string text(reinterpret_cast<const char*>(data), size);
  RoundTrip(plain, text, text);
  const bool valid = !vllm::utf8::FindInvalid(text).has_value();
  RoundTrip(nfc, text, valid ? vllm::testing::Nfc(text) : "");
  std::vector<int32_t> ids(size / sizeof(int32_t));
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * sizeof(int32_t));  // memcpy takes no null pointer
  for (const vllm::Tokenizer* tokenizer : {&plain, &nfc}) {
    try {
      tokenizer->Decode(ids, (size & 1) != 0);
    } catch (const vt::Error&) {
    }
  }
  return 0;
}
