// GdnChunkedPrefill products and exp, AVX2 + FMA build of gdn_chunked_vec.h (8 lanes,
// 6 x 16 micro-tiles).
#include "gdn_chunked_vec.h"

namespace vt::cpu::gdn {

const ChunkKernels& ChunkKernelsAvx2() {
  static const ChunkKernels kernels = {&MatMulVectorised, &ExpInPlaceVectorised};
  return kernels;
}

}  // namespace vt::cpu::gdn
