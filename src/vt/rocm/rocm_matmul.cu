// MatMul on ROCm: always our kernels (src/vt/gpu/matmul.cu); Debian packages no
// hipBLAS/rocBLAS, so matmul_choice.h is asked without a vendor library (and a
// variant forced through vt::tuning applies as on CUDA).
#include "matmul.h"
#include "vt/ops.h"
#include "vt/tuning.h"

namespace vt::gpu {
namespace {

void MatMulRocm(const MatMulArgs& a) {
  if (a.out.dtype() != a.x.dtype()) return MatMulRocm(WithWidenedX(a));  // our kernels write x's dtype
  const MatMulShape shape = DescribeMatMul(a, false);
  RunOwnMatMul(a, ApplySkinnyVariant(ChooseMatMul(shape), shape, tuning::Variant(kSkinnyVariantFamily)));
}

}  // namespace

VT_REGISTER_KERNEL(MatMul, kROCM, MatMulRocm);

}  // namespace vt::gpu
