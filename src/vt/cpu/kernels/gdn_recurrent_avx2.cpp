// GdnRecurrent head kernel, AVX2 + FMA build of gdn_recurrent_vec.h (8 lanes).
#include "gdn_recurrent_vec.h"

namespace vt::cpu::gdn {

void RecurrentHeadAvx2(const RecurrentHeadArgs& a) { RecurrentHeadVectorised(a); }

}  // namespace vt::cpu::gdn
