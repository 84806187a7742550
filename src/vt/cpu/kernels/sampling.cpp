// CPU kernels for the sampling helpers LogSoftmax, Argmax, Penalties and TopLogprobs.
//
// LogSoftmax: x [rows..., V] (any float dtype, strided rows), out same shape f32;
// out = x - max - log(sum(exp(x - max))), all in f32, the sum over several partial
// sums so that a 250k-entry vocabulary keeps its accuracy. out may be the same view
// as an f32 x (each element is read before it is written).
//
// Argmax: x [R, V] float (strided rows), out [R] i32: the first index of the row's
// largest value; a NaN counts as larger than any number (as torch.argmax), so the
// first NaN wins if there is one. With `allowed`, only the indices it sets compete.
//
// Penalties (op_args.h): per row, a count per vocabulary entry (one buffer of V ints
// reused by the rows: a step's rows hold at most a few thousand tokens each, so the
// row loop is serial), each listed token adjusted once, its count then cleared.
//
// TopLogprobs (op_args.h): per row, the normaliser as LogSoftmax's (over a copy with
// -inf at the indices `allowed` clears, when given), then the k best indices by a
// partial sort (value descending, lower index first: vllm::TopLogprobs' order).
//
// Rows are split across threads; non-f32 rows are converted to f32 first. The
// exponentials and the argmax search run in the row functions of the active
// instruction set (row_kernels.h; sampling_avx2.cpp / sampling_avx512.cpp): a libm
// call per vocabulary entry would cost milliseconds per row.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "../cpu_features.h"
#include "../cpu_util.h"
#include "../thread_pool.h"
#include "row_kernels.h"
#include "vt/ops.h"
#include "vt/reach.h"

namespace vt::cpu {
namespace {

float SumExpShifted(const float* x, int64_t n, float shift) {
  constexpr int kPartials = 16;
  float partial[kPartials] = {};
  int64_t i = 0;
  for (; i + kPartials <= n; i += kPartials) {
    for (int j = 0; j < kPartials; ++j) partial[j] += std::exp(x[i + j] - shift);
  }
  for (; i < n; ++i) partial[0] += std::exp(x[i] - shift);
  float sum = 0;
  for (float p : partial) sum += p;
  return sum;
}

int64_t Argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return i;
    if (x[i] > x[best]) best = i;
  }
  return best;
}

constexpr SamplingRowKernels kPortableRows = {&SumExpShifted, &Argmax};

}  // namespace

const SamplingRowKernels& SamplingRowsPortable() { return kPortableRows; }

namespace {

const SamplingRowKernels& ActiveSamplingRows(const char* kernel) {
  const Isa isa = ActiveIsa();
  reach::Hit(std::string(kernel) + "." + IsaName(isa));
  switch (isa) {
    case Isa::kAvx512: return SamplingRowsAvx512();
    case Isa::kAvx2: return SamplingRowsAvx2();
    default: return SamplingRowsPortable();
  }
}

// Calls fn(row as f32) for every row r of x [rows..., V], converting non-f32 rows.
template <typename Fn>
void ForEachRowF32(const Tensor& x, int64_t grain, const Fn& fn) {
  const int64_t n = x.size(-1);
  const DType dtype = x.dtype();
  const char* data = static_cast<const char*>(x.data());
  const Rows rows(x);
  ParallelFor(rows.count(), grain, [&](int64_t begin, int64_t end) {
    std::vector<float> converted(dtype == DType::kF32 ? 0 : static_cast<size_t>(n));
    for (int64_t r = begin; r < end; ++r) {
      const char* row = data + BytesFor(dtype, rows.Offset(r));
      if (dtype == DType::kF32) {
        fn(r, reinterpret_cast<const float*>(row));
      } else {
        LoadRow(row, dtype, n, converted.data());
        fn(r, converted.data());
      }
    }
  });
}

void LogSoftmaxCpu(const LogSoftmaxArgs& a) {
  const SamplingRowKernels& rows_fn = ActiveSamplingRows("LogSoftmaxCpu");
  const int64_t n = a.x.size(-1);
  const Rows out_rows(a.out);
  float* out = a.out.data_ptr<float>();
  ForEachRowF32(a.x, std::max<int64_t>(1, 16384 / n), [&](int64_t r, const float* x) {
    const float max_value = *std::max_element(x, x + n);
    const float log_norm = max_value + std::log(rows_fn.sum_exp_shifted(x, n, max_value));
    float* o = out + out_rows.Offset(r);
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] - log_norm;
  });
}

// Keeps the first of the largest (a NaN counting as largest) of best and candidate,
// candidate coming later in the row; best < 0 is none yet.
void KeepFirstLargest(const float* x, int64_t& best, int64_t candidate) {
  if (best < 0 || (!std::isnan(x[best]) && (std::isnan(x[candidate]) || x[candidate] > x[best]))) best = candidate;
}

// Argmax over the indices `allowed` sets (a bit per index): runs of whole allowed
// words go to the vector row function, the rest bit by bit (a grammar's mask is
// mostly whole words of allowed or rejected tokens). -1 when none is allowed.
int64_t MaskedArgmax(const SamplingRowKernels& rows_fn, const float* x, int64_t n, const uint32_t* allowed) {
  int64_t best = -1;
  const int64_t words = (n + 31) / 32;
  int64_t run_begin = -1;  // first word of the current run of whole allowed words
  const auto flush_run = [&](int64_t end_word) {
    if (run_begin < 0) return;
    const int64_t begin = run_begin * 32, end = std::min(n, end_word * 32);
    KeepFirstLargest(x, best, begin + rows_fn.argmax(x + begin, end - begin));
    run_begin = -1;
  };
  for (int64_t w = 0; w < words; ++w) {
    uint32_t word = allowed[w];
    if (w == words - 1 && n % 32 != 0) word &= (1u << (n % 32)) - 1;  // bits past the row
    if (word == ~0u) {
      if (run_begin < 0) run_begin = w;
      continue;
    }
    flush_run(w);
    for (; word != 0; word &= word - 1) KeepFirstLargest(x, best, w * 32 + std::countr_zero(word));
  }
  flush_run(words);
  return best;
}

void ArgmaxCpu(const ArgmaxArgs& a) {
  const SamplingRowKernels& rows_fn = ActiveSamplingRows("ArgmaxCpu");
  const int64_t n = a.x.size(1);
  int32_t* out = a.out.data_ptr<int32_t>();
  if (!a.allowed.defined()) {
    ForEachRowF32(a.x, std::max<int64_t>(1, 65536 / n),
                  [&](int64_t r, const float* x) { out[r] = static_cast<int32_t>(rows_fn.argmax(x, n)); });
    return;
  }
  const auto* allowed = static_cast<const uint32_t*>(a.allowed.data());
  const int64_t words = a.allowed.size(1);
  ForEachRowF32(a.x, std::max<int64_t>(1, 65536 / n), [&](int64_t r, const float* x) {
    out[r] = static_cast<int32_t>(std::max<int64_t>(0, MaskedArgmax(rows_fn, x, n, allowed + r * words)));
  });
}

void PenaltiesCpu(const PenaltiesArgs& a) {
  const int64_t rows = a.x.size(0), vocab = a.x.size(1), length = a.token_ids.size(1);
  const int32_t* ids = a.token_ids.data_ptr<int32_t>();
  const int32_t* output_begin = a.output_begin.data_ptr<int32_t>();
  const float* params = a.params.data_ptr<float>();
  // counts[t]: bit 31 marks t as seen in the row, the low bits count its outputs.
  constexpr uint32_t kSeen = 1u << 31;
  for (int64_t i = 0; i < rows * length; ++i) {  // every id checked before x changes
    if (ids[i] < -1 || ids[i] >= vocab) {
      throw Error("vt::Penalties on cpu: token_ids[" + std::to_string(i / length) + ", " + std::to_string(i % length) +
                  "] = " + std::to_string(ids[i]) + " is not a token of x " + a.x.Describe() + " (or -1, padding)");
    }
  }
  std::vector<uint32_t> counts(static_cast<size_t>(vocab), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* row_ids = ids + r * length;
    for (int64_t i = 0; i < length; ++i) {
      const int32_t t = row_ids[i];
      if (t == -1) continue;
      counts[t] |= kSeen;
      if (i >= output_begin[r]) ++counts[t];
    }
    const double repetition = params[3 * r], frequency = params[3 * r + 1], presence = params[3 * r + 2];
    float* x = a.x.data_ptr<float>() + r * a.x.stride(0);
    for (int64_t i = 0; i < length; ++i) {
      const int32_t t = row_ids[i];
      if (t < 0 || counts[t] == 0) continue;  // padding, or a token adjusted already
      const uint32_t n = counts[t] & ~kSeen;
      counts[t] = 0;
      double v = x[t];
      v = v > 0 ? v / repetition : v * repetition;
      if (n > 0) v -= frequency * n + presence;
      x[t] = static_cast<float>(v);
    }
  }
}

void TopLogprobsCpu(const TopLogprobsArgs& a) {
  const SamplingRowKernels& rows_fn = ActiveSamplingRows("TopLogprobsCpu");
  const int64_t rows = a.x.size(0), n = a.x.size(1), columns = a.ids.size(1);
  const int32_t* token = a.token.data_ptr<int32_t>();
  for (int64_t r = 0; r < rows; ++r) {  // every token checked before anything is written
    if (token[r] < 0 || token[r] >= n) {
      throw Error("vt::TopLogprobs on cpu: token[" + std::to_string(r) + "] = " + std::to_string(token[r]) +
                  " is not an index of x " + a.x.Describe());
    }
  }
  const auto* allowed = a.allowed.defined() ? static_cast<const uint32_t*>(a.allowed.data()) : nullptr;
  const int64_t words = a.allowed.defined() ? a.allowed.size(1) : 0;
  int32_t* ids = a.ids.data_ptr<int32_t>();
  float* values = a.values.data_ptr<float>();
  ForEachRowF32(a.x, std::max<int64_t>(1, 16384 / n), [&](int64_t r, const float* x) {
    std::vector<float> masked;
    if (allowed != nullptr) {
      const uint32_t* bits = allowed + r * words;
      masked.assign(x, x + n);
      for (int64_t i = 0; i < n; ++i) {
        if (((bits[i >> 5] >> (i & 31)) & 1u) == 0) masked[i] = -std::numeric_limits<float>::infinity();
      }
      x = masked.data();
    }
    const float max_value = *std::max_element(x, x + n);
    const float log_norm = max_value + std::log(rows_fn.sum_exp_shifted(x, n, max_value));
    int32_t* row_ids = ids + r * columns;
    float* row_values = values + r * columns;
    row_ids[0] = token[r];
    row_values[0] = x[token[r]] - log_norm;
    const int64_t k = columns - 1;
    if (k == 0) return;
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t i, int32_t j) { return x[i] > x[j] || (x[i] == x[j] && i < j); });
    for (int64_t j = 0; j < k; ++j) {
      row_ids[1 + j] = order[j];
      row_values[1 + j] = x[order[j]] - log_norm;
    }
  });
}

}  // namespace

VT_REGISTER_KERNEL(LogSoftmax, kCPU, LogSoftmaxCpu);
VT_REGISTER_KERNEL(Argmax, kCPU, ArgmaxCpu);
VT_REGISTER_KERNEL(Penalties, kCPU, PenaltiesCpu);
VT_REGISTER_KERNEL(TopLogprobs, kCPU, TopLogprobsCpu);

}  // namespace vt::cpu
