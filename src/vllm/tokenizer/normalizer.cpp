#include "normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "vt/error.h"

namespace vllm {
namespace {

utf8proc_option_t OptionsFor(UnicodeForm form) {
  switch (form) {
    case UnicodeForm::kNFC: return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    case UnicodeForm::kNFD: return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case UnicodeForm::kNFKC:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case UnicodeForm::kNFKD:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  return UTF8PROC_STABLE;
}

// Text that a form leaves unchanged without looking it up. ASCII is unchanged by every
// form. For NFC more is known: code points below U+0300 are unchanged unless a combining
// mark follows them, and no combining mark lies below U+0300; their UTF-8 lead bytes are
// all below 0xCC, so Latin-1 text skips utf8proc too. (NFD and the K forms do change
// some of those code points: U+00E9, U+00A0.)
bool AlreadyInForm(std::string_view text, UnicodeForm form) {
  const unsigned char limit = form == UnicodeForm::kNFC ? 0xCC : 0x80;
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= limit) return false;
  }
  return true;
}

std::string ApplyForm(std::string_view text, UnicodeForm form) {
  utf8proc_uint8_t* mapped = nullptr;
  // An explicit length (no UTF8PROC_NULLTERM) keeps U+0000 characters in the text.
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &mapped, OptionsFor(form));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(mapped, &std::free);
  if (length < 0) {
    throw vt::Error(std::string("tokenizer: Unicode normalisation failed: ") + utf8proc_errmsg(length));
  }
  return std::string(reinterpret_cast<const char*>(mapped), static_cast<size_t>(length));
}

}  // namespace

std::string NormalizeUnicode(std::string_view text, std::span<const UnicodeForm> forms) {
  std::string out(text);
  for (UnicodeForm form : forms) {
    if (!AlreadyInForm(out, form)) out = ApplyForm(out, form);
  }
  return out;
}

}  // namespace vllm
