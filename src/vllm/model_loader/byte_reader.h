// Bounds-checked little-endian reads from a file's bytes (internal to the loaders).
//
// Every read checks that the bytes exist before touching them, and a failure
// throws vt::Error naming the file, what was being read and where:
//   "m.gguf: truncated file: reading the name of tensor 3 needs 8 bytes at offset 200, but the file ends at 203".
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "vt/error.h"

namespace vllm::detail {

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, std::string source)
      : data_(data), size_(size), source_(std::move(source)) {}

  size_t pos() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }
  const std::string& source() const { return source_; }

  template <typename T>
  T Read(const std::string& what) {
    Require(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // A GGUF string: u64 length, then that many bytes.
  std::string ReadString(const std::string& what) {
    const uint64_t length = Read<uint64_t>("the length of " + what);
    if (length > remaining()) {
      throw vt::Error(source_ + ": " + what + " claims a length of " + std::to_string(length) + " bytes at offset " +
                      std::to_string(pos_) + ", but only " + std::to_string(remaining()) + " bytes remain in the file");
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(length));
    pos_ += static_cast<size_t>(length);
    return s;
  }

  void Require(size_t bytes, const std::string& what) const {
    if (bytes > remaining()) {
      throw vt::Error(source_ + ": truncated file: " + what + " needs " + std::to_string(bytes) + " bytes at offset " +
                      std::to_string(pos_) + ", but the file ends at " + std::to_string(size_));
    }
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string source_;
};

}  // namespace vllm::detail
