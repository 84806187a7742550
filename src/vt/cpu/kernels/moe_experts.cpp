// MoeExperts on the CPU (docs/qwen35.md §4.4): the routed experts of a MoE block,
//   out[t] = sum_j w[t, j] * down_e(silu(gate_e x_t) * up_e x_t),  e = ids[t, j].
//
// Contract (vt/op_args.h, checked by vt::MoeExperts): x [T, H] float; w_gate, w_up
// [E, I, H] and w_down [E, H, I] in any dtype MatMul takes, each expert's matrix
// with contiguous rows and a free expert stride (views into a fused gate_up
// [E, 2I, H] work); topk_weights [T, k] f32 and topk_ids [T, k] i32, contiguous;
// out [T, H] of x's dtype, overwritten. Every id is checked to be in [0, E), or with
// an expert slice (expert parallelism: w_* hold global experts [expert_begin,
// expert_begin + E) of num_experts) in [0, num_experts), ids outside the slice being
// skipped. An optional shared expert is one more expert that every token visits with weight
// sigmoid(shared_gate_logits[t]); it joins the routed experts' parallel regions.
//
// The T * k (token, slot) pairs are grouped by expert with a counting sort, then
// each expert that received tokens runs its projections as MatMuls over its gathered
// rows (the CPU MatMul machinery: GEMV for a decode step, GEMM when a prefill sends
// it many tokens). The gate/up MatMuls of all experts share one parallel region, and
// so do the down MatMuls: a decode step is two thread hand-offs, not 3 per expert.
// When w_up's rows directly follow w_gate's (a fused gate_up tensor), gate and up
// are one MatMul over 2I weight rows. Results accumulate in f32 in expert order, so
// the sum is deterministic.
#include <cmath>
#include <string>
#include <vector>

#include "../cpu_util.h"
#include "matmul_kernels.h"
#include "row_kernels.h"
#include "vt/ops.h"

namespace vt::cpu {
namespace {

// pairs[offsets[e] .. offsets[e + 1]) are the flat (t * k + j) pairs routed to e.
struct ExpertRoutes {
  std::vector<int64_t> offsets;
  std::vector<int64_t> pairs;
};

// Pairs routed to experts outside the local slice are left out (expert parallelism).
ExpertRoutes GroupByExpert(const MoeExpertsArgs& a) {
  const int64_t local_experts = a.w_gate.size(0), num_pairs = a.topk_ids.numel();
  const int64_t all_experts = a.num_experts != 0 ? a.num_experts : local_experts;
  const auto* ids = a.topk_ids.data_ptr<int32_t>();
  ExpertRoutes routes{std::vector<int64_t>(static_cast<size_t>(local_experts + 1), 0), {}};
  auto local = [&](int64_t p) { return ids[p] - a.expert_begin; };  // the id in w_gate, when in [0, local_experts)
  for (int64_t p = 0; p < num_pairs; ++p) {
    if (ids[p] < 0 || ids[p] >= all_experts) {
      const int64_t k = a.topk_ids.size(1);
      throw Error("vt::MoeExperts on cpu: topk_ids[" + std::to_string(p / k) + ", " + std::to_string(p % k) +
                  "] = " + std::to_string(ids[p]) + " is not an expert of w_gate " + a.w_gate.Describe() + " (" +
                  std::to_string(all_experts) + " experts)");
    }
    if (local(p) >= 0 && local(p) < local_experts) ++routes.offsets[local(p) + 1];
  }
  for (int64_t e = 0; e < local_experts; ++e) routes.offsets[e + 1] += routes.offsets[e];
  routes.pairs.resize(static_cast<size_t>(routes.offsets[local_experts]));
  std::vector<int64_t> next(routes.offsets.begin(), routes.offsets.end() - 1);
  for (int64_t p = 0; p < num_pairs; ++p) {
    if (local(p) >= 0 && local(p) < local_experts) routes.pairs[next[local(p)]++] = p;
  }
  return routes;
}

// Whether w_up[e] is the I rows right after w_gate[e] in one tensor (fused gate_up).
bool UpFollowsGate(const Tensor& gate, const Tensor& up) {
  return gate.storage() == up.storage() && gate.stride(0) == up.stride(0) &&
         up.offset() == gate.offset() + gate.size(0) * gate.stride(0);
}

// silu(gate) * up, in place into gate; both [rows, I] with the given row strides.
// The portable SiluMul row (the vectorised ones round differently in the last ulp).
void SiluMulRows(float* gate, int64_t gate_stride, const float* up, int64_t up_stride, int64_t rows, int64_t inter) {
  const auto silu_mul = ActivationRowsPortable(DType::kF32).silu_mul;
  for (int64_t r = 0; r < rows; ++r) silu_mul(gate + r * gate_stride, up + r * up_stride, inter, gate + r * gate_stride);
}

// The buffers of one expert that received `count` rows: a routed expert's (token,
// slot) pairs, or every token for the shared expert.
struct ExpertWork {
  Tensor w_gate, w_up, w_down;  // [I, H], [I, H], [H, I] of this expert
  std::vector<int64_t> tokens;  // the token of each row
  std::vector<float> weights;   // the routing weight of each row
  Tensor rows;                  // [count, H] f32, the gathered x rows
  Tensor gate_up;               // [count, 2I] f32: gate | up, then silu(gate) * up in the gate half
  Tensor down;                  // [count, H] f32
  int64_t count() const { return static_cast<int64_t>(tokens.size()); }
  int64_t inter() const { return w_gate.size(0); }
};

void AllocateAndGather(const MoeExpertsArgs& a, ExpertWork& w) {
  const int64_t hidden = a.x.size(1), count = w.count();
  w.rows = Tensor::Empty({count, hidden}, DType::kF32);
  w.gate_up = Tensor::Empty({count, 2 * w.inter()}, DType::kF32);
  w.down = Tensor::Empty({count, hidden}, DType::kF32);
  for (int64_t r = 0; r < count; ++r) {
    LoadRow(ElementAddress(a.x.data(), a.x.dtype(), w.tokens[r] * a.x.stride(0)), a.x.dtype(), hidden,
            w.rows.data_ptr<float>() + r * hidden);
  }
}

// The routed experts that received pairs, in expert order, then the shared expert.
std::vector<ExpertWork> GatherExpertRows(const MoeExpertsArgs& a, const ExpertRoutes& routes) {
  const int64_t k = a.topk_ids.size(1), tokens = a.x.size(0);
  const auto* topk_weights = a.topk_weights.data_ptr<float>();
  std::vector<ExpertWork> work;
  for (int64_t e = 0; e + 1 < static_cast<int64_t>(routes.offsets.size()); ++e) {
    if (routes.offsets[e + 1] == routes.offsets[e]) continue;
    ExpertWork w{a.w_gate.Select(0, e), a.w_up.Select(0, e), a.w_down.Select(0, e)};
    for (int64_t i = routes.offsets[e]; i < routes.offsets[e + 1]; ++i) {
      w.tokens.push_back(routes.pairs[i] / k);
      w.weights.push_back(topk_weights[routes.pairs[i]]);
    }
    AllocateAndGather(a, w);
    work.push_back(std::move(w));
  }
  if (a.shared_w_gate.defined()) {
    ExpertWork w{a.shared_w_gate, a.shared_w_up, a.shared_w_down};
    const Tensor& g = a.shared_gate_logits;
    for (int64_t t = 0; t < tokens; ++t) {
      float logit;
      LoadRow(ElementAddress(g.data(), g.dtype(), t * g.stride(0)), g.dtype(), 1, &logit);
      w.tokens.push_back(t);
      w.weights.push_back(1.0f / (1.0f + std::exp(-logit)));
    }
    AllocateAndGather(a, w);
    work.push_back(std::move(w));
  }
  return work;
}

// gate and up projections of every active expert, in one parallel region.
void RunGateUp(const MoeExpertsArgs& a, std::vector<ExpertWork>& work) {
  const int64_t hidden = a.x.size(1);
  std::vector<matmul::PreparedMatMul> matmuls;
  for (ExpertWork& w : work) {
    const int64_t inter = w.inter();
    if (UpFollowsGate(w.w_gate, w.w_up)) {
      const Tensor w_gate_up = w.w_gate.AsStrided({2 * inter, hidden}, w.w_gate.strides(), w.w_gate.offset());
      matmuls.push_back(matmul::PrepareMatMul({.x = w.rows, .w = w_gate_up, .out = w.gate_up}));
    } else {
      matmuls.push_back(
          matmul::PrepareMatMul({.x = w.rows, .w = w.w_gate, .out = w.gate_up.Slice(1, 0, inter)}));
      matmuls.push_back(
          matmul::PrepareMatMul({.x = w.rows, .w = w.w_up, .out = w.gate_up.Slice(1, inter, 2 * inter)}));
    }
  }
  matmul::RunPreparedMatMuls(matmuls);
}

void RunDown(std::vector<ExpertWork>& work) {
  std::vector<matmul::PreparedMatMul> matmuls;
  for (ExpertWork& w : work) {
    const int64_t inter = w.inter();
    SiluMulRows(w.gate_up.data_ptr<float>(), 2 * inter, w.gate_up.data_ptr<float>() + inter, 2 * inter, w.count(),
                inter);
    matmuls.push_back(matmul::PrepareMatMul({.x = w.gate_up.Slice(1, 0, inter), .w = w.w_down, .out = w.down}));
  }
  matmul::RunPreparedMatMuls(matmuls);
}

void MoeExpertsCpu(const MoeExpertsArgs& a) {
  const ExpertRoutes routes = GroupByExpert(a);
  std::vector<ExpertWork> work = GatherExpertRows(a, routes);
  RunGateUp(a, work);
  RunDown(work);
  // out[t] = sum of weight * down rows, added in expert order, the shared expert last
  // (deterministic).
  const int64_t tokens = a.x.size(0), hidden = a.x.size(1);
  std::vector<float> acc(static_cast<size_t>(tokens * hidden), 0.0f);  // [T, H]
  for (const ExpertWork& w : work) {
    for (int64_t r = 0; r < w.count(); ++r) {
      float* dst = acc.data() + w.tokens[r] * hidden;
      const float* src = w.down.data_ptr<float>() + r * hidden;
      const float weight = w.weights[r];
      for (int64_t h = 0; h < hidden; ++h) dst[h] += weight * src[h];
    }
  }
  for (int64_t t = 0; t < tokens; ++t) {
    StoreRow(acc.data() + t * hidden, hidden, ElementAddress(a.out.data(), a.out.dtype(), t * a.out.stride(0)),
             a.out.dtype());
  }
}

}  // namespace

VT_REGISTER_KERNEL(MoeExperts, kCPU, MoeExpertsCpu);

}  // namespace vt::cpu
