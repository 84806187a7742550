// GdnChunkedPrefill products and exp, AVX-512 build of gdn_chunked_vec.h (16 lanes,
// 8 x 32 micro-tiles).
#include "gdn_chunked_vec.h"

namespace vt::cpu::gdn {

const ChunkKernels& ChunkKernelsAvx512() {
  static const ChunkKernels kernels = {&MatMulVectorised, &ExpInPlaceVectorised};
  return kernels;
}

}  // namespace vt::cpu::gdn
