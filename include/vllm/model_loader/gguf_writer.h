// GGUF writer (v3, little-endian), the inverse of GgufFile.
//
// Tensors are given in vt's row-major shape and written with ne reversed, so a
// tensor [out, in] becomes ne={in, out} as llama.cpp expects. A tensor is either
// given now (any contiguous CPU tensor: its bytes are written as they are) or as a
// producer called when Write() reaches it, so converting a large model holds one
// transformed tensor in memory at a time. Data is aligned to `general.alignment`
// (32 unless set). Write() goes through a temporary file renamed at the end, so a
// failed write never leaves a half-written model under the final name.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vllm/model_loader/gguf_metadata.h"
#include "vt/tensor.h"

namespace vllm {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = 32);

  GgufMetadata& metadata() { return metadata_; }
  const GgufMetadata& metadata() const { return metadata_; }

  // Adds a tensor whose data exists now (contiguous, on the CPU).
  void AddTensor(const std::string& name, const vt::Tensor& tensor);
  // Adds a tensor produced at write time; the producer must return a contiguous CPU
  // tensor of exactly this dtype and shape.
  void AddTensor(const std::string& name, vt::DType dtype, const vt::Shape& shape,
                 std::function<vt::Tensor()> produce);
  void RemoveTensor(const std::string& name);
  bool HasTensor(const std::string& name) const;

  struct PlannedTensor {
    std::string name;
    vt::DType dtype;
    vt::Shape shape;  // row-major
  };
  std::vector<PlannedTensor> tensors() const;

  void Write(const std::string& path) const;

 private:
  struct Entry {
    PlannedTensor planned;
    std::function<vt::Tensor()> produce;
  };

  uint32_t alignment_;
  GgufMetadata metadata_;
  std::vector<Entry> entries_;
};

}  // namespace vllm
