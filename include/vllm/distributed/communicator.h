// vllm::Communicator: the collectives one process group of ranks runs together
// (vLLM's GroupCoordinator / device communicators, vllm/distributed/). Every rank of
// the group makes the same calls in the same order; a call returns on a rank once
// its part is done. A peer that died or stopped answering makes the call throw
// vt::Error naming the collective and the rank (it never hangs past the timeout).
//
// Backends: Gloo over TCP (gloo_communicator.h) for CPU ranks and for the
// rendezvous; NCCL for CUDA ranks is not built yet (docs/distributed.md).
//
//   std::unique_ptr<Communicator> group = CreateGlooCommunicator({.rank = r, .world_size = 2,
//                                                                 .rendezvous_dir = dir});
//   AllReduceSum(*group, partial);  // partial [T, H]: every rank's rows summed, on every rank
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vt/tensor.h"

namespace vllm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // data [count] f32 on every rank becomes the element-wise sum over the ranks.
  virtual void AllReduceSum(float* data, size_t count) = 0;
  // in [count] f32 of every rank -> out [world_size * count], rank r's at r * count.
  virtual void AllGather(const float* in, size_t count, float* out) = 0;
  // root's bytes [size] become every rank's (size equal on every rank).
  virtual void Broadcast(void* bytes, size_t size, int root) = 0;
  virtual void Barrier() = 0;
  // How long the following collectives wait for a peer (a worker waits for rank 0's
  // next step longer than for a peer inside a forward).
  virtual void SetTimeout(std::chrono::milliseconds timeout) = 0;
};

// Tensor forms of the collectives (what the model calls). `t` is any float dtype on
// the CPU, any strides: it is summed in f32 (a 16-bit dtype is widened for the sum
// and rounded once at the end, so the order of the ranks never changes its bits).
// Throws vt::Error naming the tensor off the CPU (a GPU group is not built yet).
void AllReduceSum(Communicator& group, const vt::Tensor& t);
// in [N, C] f32 on every rank -> out [N, world_size * C] f32: rank r's columns at
// [r * C, (r + 1) * C) (the vocabulary-parallel LM head's logits).
void AllGatherColumns(Communicator& group, const vt::Tensor& in, const vt::Tensor& out);
// root's `bytes` become every rank's (sizes may differ before the call).
void BroadcastBytes(Communicator& group, std::vector<uint8_t>& bytes, int root);

}  // namespace vllm
