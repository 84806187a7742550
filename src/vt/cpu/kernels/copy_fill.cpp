// CPU kernels for Copy, Fill and Add.
//
// Copy: dst = cast(src) for any pair of plain dtypes and any strides; rows of a
// block dtype dequantize through vt::DequantizeRow. Work is split by rows of the
// destination; a contiguous same-dtype pair is one memcpy per row, a contiguous
// pair of float dtypes converts through an f32 row. Two whole contiguous tensors
// of one plain dtype are one memcpy split into large pieces (a recurrent state's
// conv rows are 3 values: a row at a time spent its time addressing rows).
// Fill: the element's bytes are computed once and stored along each row.
#include "../cpu_util.h"
#include "../thread_pool.h"
#include "vt/ops.h"
#include "vt/quant.h"

namespace vt::cpu {
namespace {

void CopyCpu(const CopyArgs& a) {
  const Tensor& src = a.src;
  const Tensor& dst = a.dst;
  if (src.ndim() == 0) {
    StoreFloat(dst.data(), dst.dtype(), 0, LoadFloat(src.data(), src.dtype(), 0));
    return;
  }
  if (src.dtype() == dst.dtype() && !IsQuantized(src.dtype()) && src.is_contiguous() && dst.is_contiguous()) {
    const int64_t bytes = BytesFor(dst.dtype(), dst.numel());
    const char* s = ElementAddress(src.data(), src.dtype(), 0);
    char* d = ElementAddress(dst.data(), dst.dtype(), 0);
    constexpr int64_t kPiece = 1 << 16;
    ParallelFor((bytes + kPiece - 1) / kPiece, 1, [&](int64_t begin, int64_t end) {
      const int64_t from = begin * kPiece, to = std::min(bytes, end * kPiece);
      std::memcpy(d + from, s + from, static_cast<size_t>(to - from));
    });
    return;
  }
  const int64_t n = dst.size(-1);
  const int64_t src_stride = src.stride(-1), dst_stride = dst.stride(-1);
  Rows src_rows(src), dst_rows(dst);
  const bool integer_pair = IsInteger(src.dtype()) && IsInteger(dst.dtype());
  const bool float_pair = IsFloat(src.dtype()) && IsFloat(dst.dtype());
  ParallelFor(dst_rows.count(), std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t r = begin; r < end; ++r) {
      const char* s = ElementAddress(src.data(), src.dtype(), src_rows.Offset(r));
      char* d = ElementAddress(dst.data(), dst.dtype(), dst_rows.Offset(r));
      if (IsQuantized(src.dtype())) {
        DequantizeRow(s, src.dtype(), n, row.data());
        if (dst_stride == 1) {
          StoreRow(row.data(), n, d, dst.dtype());
        } else {
          for (int64_t i = 0; i < n; ++i) StoreFloat(d, dst.dtype(), i * dst_stride, row[i]);
        }
      } else if (src.dtype() == dst.dtype() && src_stride == 1 && dst_stride == 1) {
        std::memcpy(d, s, static_cast<size_t>(BytesFor(dst.dtype(), n)));
      } else if (float_pair && src_stride == 1 && dst_stride == 1) {
        LoadRow(s, src.dtype(), n, row.data());
        StoreRow(row.data(), n, d, dst.dtype());
      } else if (integer_pair) {
        for (int64_t i = 0; i < n; ++i) {
          int64_t v = LoadIndex(s, src.dtype(), i * src_stride);
          if (dst.dtype() == DType::kI64) reinterpret_cast<int64_t*>(d)[i * dst_stride] = v;
          else reinterpret_cast<int32_t*>(d)[i * dst_stride] = static_cast<int32_t>(v);
        }
      } else {
        for (int64_t i = 0; i < n; ++i) {
          StoreFloat(d, dst.dtype(), i * dst_stride, LoadFloat(s, src.dtype(), i * src_stride));
        }
      }
    }
  });
}

// The bytes of `value` stored as one element of `dtype` (integers exactly).
uint64_t ElementBits(DType dtype, double value) {
  uint64_t bits = 0;
  if (dtype == DType::kI64) {
    const int64_t v = static_cast<int64_t>(value);
    std::memcpy(&bits, &v, sizeof(v));
  } else if (dtype == DType::kI32) {
    const int32_t v = static_cast<int32_t>(value);
    std::memcpy(&bits, &v, sizeof(v));
  } else {
    StoreFloat(&bits, dtype, 0, static_cast<float>(value));
  }
  return bits;
}

// n elements of `elem_bytes` bytes each, `stride` elements apart, all set to `bits`.
template <typename Bits>
void FillRow(char* d, int64_t n, int64_t stride, uint64_t bits) {
  Bits value;
  std::memcpy(&value, &bits, sizeof(Bits));
  Bits* out = reinterpret_cast<Bits*>(d);
  for (int64_t i = 0; i < n; ++i) out[i * stride] = value;
}

void FillCpu(const FillArgs& a) {
  const Tensor& dst = a.dst;
  const uint64_t bits = ElementBits(dst.dtype(), a.value);
  const int64_t elem_bytes = BytesFor(dst.dtype(), 1);
  if (dst.ndim() == 0) {
    std::memcpy(dst.data(), &bits, static_cast<size_t>(elem_bytes));
    return;
  }
  const int64_t n = dst.size(-1), stride = dst.stride(-1);
  Rows rows(dst);
  char* data = static_cast<char*>(dst.data());
  ParallelFor(rows.count(), std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      char* d = data + elem_bytes * rows.Offset(r);
      switch (elem_bytes) {
        case 2: FillRow<uint16_t>(d, n, stride, bits); break;
        case 4: FillRow<uint32_t>(d, n, stride, bits); break;
        default: FillRow<uint64_t>(d, n, stride, bits); break;
      }
    }
  });
}

void AddCpu(const AddArgs& a) {
  const DType dtype = a.out.dtype();
  if (a.out.ndim() == 0) {
    StoreFloat(a.out.data(), dtype, 0, LoadFloat(a.a.data(), dtype, 0) + LoadFloat(a.b.data(), dtype, 0));
    return;
  }
  const int64_t n = a.out.size(-1);
  const int64_t sa = a.a.stride(-1), sb = a.b.stride(-1), so = a.out.stride(-1);
  Rows ra(a.a), rb(a.b), ro(a.out);
  ParallelFor(ro.count(), std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const char* pa = ElementAddress(a.a.data(), dtype, ra.Offset(r));
      const char* pb = ElementAddress(a.b.data(), dtype, rb.Offset(r));
      char* po = ElementAddress(a.out.data(), dtype, ro.Offset(r));
      if (dtype == DType::kF32 && sa == 1 && sb == 1 && so == 1) {
        const float* fa = reinterpret_cast<const float*>(pa);
        const float* fb = reinterpret_cast<const float*>(pb);
        float* fo = reinterpret_cast<float*>(po);
        for (int64_t i = 0; i < n; ++i) fo[i] = fa[i] + fb[i];
      } else {
        for (int64_t i = 0; i < n; ++i) {
          StoreFloat(po, dtype, i * so, LoadFloat(pa, dtype, i * sa) + LoadFloat(pb, dtype, i * sb));
        }
      }
    }
  });
}

}  // namespace

VT_REGISTER_KERNEL(Copy, kCPU, CopyCpu);
VT_REGISTER_KERNEL(Fill, kCPU, FillCpu);
VT_REGISTER_KERNEL(Add, kCPU, AddCpu);

}  // namespace vt::cpu
