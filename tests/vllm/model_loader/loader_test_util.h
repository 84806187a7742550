// Helpers for the model-loader tests: expecting errors by their words, raw bytes.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "vt/error.h"

namespace vllm::testing {

// Passes when `fn` throws vt::Error whose message contains every one of `words`.
inline ::testing::AssertionResult ThrowsWith(const std::function<void()>& fn,
                                             std::initializer_list<std::string> words) {
  try {
    fn();
  } catch (const vt::Error& e) {
    const std::string message = e.what();
    for (const std::string& w : words) {
      if (message.find(w) == std::string::npos) {
        return ::testing::AssertionFailure() << "message lacks \"" << w << "\": " << message;
      }
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-vt::Error: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// Little-endian byte builder for hand-made (often malformed) files.
class Bytes {
 public:
  template <typename T>
  Bytes& Put(T v) {
    const size_t at = data.size();
    data.resize(at + sizeof(T));
    std::memcpy(data.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& U32(uint32_t v) { return Put(v); }
  Bytes& U64(uint64_t v) { return Put(v); }
  Bytes& Raw(const std::string& s) {
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& Str(const std::string& s) { return U64(s.size()).Raw(s); }
  Bytes& PadTo(size_t alignment) {
    while (data.size() % alignment) data.push_back(0);
    return *this;
  }
  Bytes& Zeros(size_t n) {
    data.resize(data.size() + n, 0);
    return *this;
  }
  std::vector<uint8_t> data;
};

}  // namespace vllm::testing
