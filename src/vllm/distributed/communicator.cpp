#include "vllm/distributed/communicator.h"

#include <string>

#include "vt/error.h"

namespace vllm {
namespace {

void CheckOnCpu(const char* op, const vt::Tensor& t) {
  if (t.device().type != vt::DeviceType::kCPU) {
    throw vt::Error(std::string(op) + ": " + t.Describe() +
                    " is not on the CPU; only the Gloo (CPU) communicator is built, not NCCL");
  }
}

}  // namespace

void AllReduceSum(Communicator& group, const vt::Tensor& t) {
  CheckOnCpu("AllReduceSum", t);
  if (!vt::IsFloat(t.dtype())) {
    throw vt::Error(std::string("AllReduceSum: a float tensor is summed, got ") + t.Describe());
  }
  if (group.world_size() == 1 || t.numel() == 0) return;
  if (t.dtype() == vt::DType::kF32 && t.is_contiguous()) {
    group.AllReduceSum(t.data_ptr<float>(), static_cast<size_t>(t.numel()));
    return;
  }
  vt::Tensor sum = vt::Tensor::Empty(t.shape(), vt::DType::kF32, vt::kCpu);
  sum.CopyFrom(t);
  group.AllReduceSum(sum.data_ptr<float>(), static_cast<size_t>(sum.numel()));
  t.CopyFrom(sum);
}

void AllGatherColumns(Communicator& group, const vt::Tensor& in, const vt::Tensor& out) {
  CheckOnCpu("AllGatherColumns", in);
  CheckOnCpu("AllGatherColumns", out);
  const int64_t world = group.world_size();
  if (in.ndim() != 2 || out.ndim() != 2 || in.dtype() != vt::DType::kF32 || out.dtype() != vt::DType::kF32 ||
      out.size(0) != in.size(0) || out.size(1) != world * in.size(1) || !out.is_contiguous()) {
    throw vt::Error("AllGatherColumns: in must be [N, C] f32 and out a contiguous [N, " + std::to_string(world) +
                    " * C] f32, got in " + in.Describe() + ", out " + out.Describe());
  }
  const int64_t N = in.size(0), C = in.size(1);
  // No rows (a step whose prompt chunks sample nothing): equal on every rank, and a
  // zero-byte gather is a division by zero inside Gloo.
  if (N * C == 0) return;
  vt::Tensor mine = in.Contiguous();
  std::vector<float> gathered(static_cast<size_t>(world * N * C));  // [world, N, C]
  group.AllGather(mine.data_ptr<float>(), static_cast<size_t>(N * C), gathered.data());
  float* dst = out.data_ptr<float>();
  for (int64_t r = 0; r < world; ++r) {
    for (int64_t n = 0; n < N; ++n) {
      const float* src = gathered.data() + (r * N + n) * C;
      std::copy(src, src + C, dst + n * world * C + r * C);
    }
  }
}

void BroadcastBytes(Communicator& group, std::vector<uint8_t>& bytes, int root) {
  uint64_t size = bytes.size();
  group.Broadcast(&size, sizeof(size), root);
  bytes.resize(size);
  if (size > 0) group.Broadcast(bytes.data(), size, root);
}

}  // namespace vllm
