// MatMul on ROCm: always our kernels (src/vt/gpu/matmul.cu); Debian packages no
// hipBLAS/rocBLAS, so matmul_choice.h is asked without a vendor library.
#include "matmul.h"
#include "vt/ops.h"

namespace vt::gpu {
namespace {

void MatMulRocm(const MatMulArgs& a) { RunOwnMatMul(a, ChooseMatMul(DescribeMatMul(a, false))); }

}  // namespace

VT_REGISTER_KERNEL(MatMul, kROCM, MatMulRocm);

}  // namespace vt::gpu
