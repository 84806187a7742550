// The x86 kernel entry points on other CPUs (aarch64): the *_avx2 / *_avxvnni /
// *_avx512 / *_amx translation units are not built there (src/vt/CMakeLists.txt), but the
// dispatchers name their entry points. DetectedIsa() is kPortable on these CPUs, so
// none is ever chosen; reaching one is an internal error, reported as such.
#include <string>

#include "gdn_kernels.h"
#include "matmul_kernels.h"
#include "paged_attention.h"
#include "row_kernels.h"
#include "vt/error.h"

namespace vt::cpu {
namespace {

[[noreturn]] void X86Absent(const char* entry) {
  throw Error(std::string("vt (cpu): internal error: the x86 kernel ") + entry +
              " was chosen on a CPU that is not x86-64 (only the portable kernels are built here)");
}

}  // namespace

const NormRowKernels& NormRowsAvx2(DType) { X86Absent("NormRowsAvx2"); }
const NormRowKernels& NormRowsAvx512(DType) { X86Absent("NormRowsAvx512"); }
const ActivationRowKernels& ActivationRowsAvx2(DType) { X86Absent("ActivationRowsAvx2"); }
const ActivationRowKernels& ActivationRowsAvx512(DType) { X86Absent("ActivationRowsAvx512"); }
const SamplingRowKernels& SamplingRowsAvx2() { X86Absent("SamplingRowsAvx2"); }
const SamplingRowKernels& SamplingRowsAvx512() { X86Absent("SamplingRowsAvx512"); }

namespace paged_attention {
const MicroKernels& MicroKernelsAvx2(DType) { X86Absent("paged_attention::MicroKernelsAvx2"); }
const MicroKernels& MicroKernelsAvx512(DType) { X86Absent("paged_attention::MicroKernelsAvx512"); }
}  // namespace paged_attention

namespace gdn {
void ConvTokenAvx2(const ConvTokenArgs&) { X86Absent("gdn::ConvTokenAvx2"); }
void RecurrentHeadAvx2(const RecurrentHeadArgs&) { X86Absent("gdn::RecurrentHeadAvx2"); }
void RecurrentHeadAvx512(const RecurrentHeadArgs&) { X86Absent("gdn::RecurrentHeadAvx512"); }
const ChunkKernels& ChunkKernelsAvx2() { X86Absent("gdn::ChunkKernelsAvx2"); }
const ChunkKernels& ChunkKernelsAvx512() { X86Absent("gdn::ChunkKernelsAvx512"); }
}  // namespace gdn

namespace matmul {
XRowOps Avx2XRowOps() { X86Absent("matmul::Avx2XRowOps"); }
XRowOps Avx512XRowOps() { X86Absent("matmul::Avx512XRowOps"); }
void MatMulRowsAvx2(const Problem&, int64_t, int64_t) { X86Absent("matmul::MatMulRowsAvx2"); }
void MatMulRowsAvx2Vnni(const Problem&, int64_t, int64_t) { X86Absent("matmul::MatMulRowsAvx2Vnni"); }
void MatMulRowsAvx512(const Problem&, int64_t, int64_t) { X86Absent("matmul::MatMulRowsAvx512"); }
void MatMulRowsAvx512Amx(const Problem&, int64_t, int64_t) { X86Absent("matmul::MatMulRowsAvx512Amx"); }
}  // namespace matmul

}  // namespace vt::cpu
