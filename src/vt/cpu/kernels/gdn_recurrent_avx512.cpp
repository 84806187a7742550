// GdnRecurrent head kernel, AVX-512 build of gdn_recurrent_vec.h (16 lanes).
#include "gdn_recurrent_vec.h"

namespace vt::cpu::gdn {

void RecurrentHeadAvx512(const RecurrentHeadArgs& a) { RecurrentHeadVectorised(a); }

}  // namespace vt::cpu::gdn
