// Contract tests of vt::AttnGateSplit: per-head interleaved q | gate rows of the
// q projection go to query [T, H, D] and gate [T, H * D] exactly (it is a copy),
// for f32/bf16/f16, odd head dims, strided outputs, a row-strided qg (a column view of
// a merged q|k|v projection), every device and CPU ISA level.
#include "testing/op_testing.h"

namespace vt {
namespace {

using testing::AllClose;
using testing::ForEachDeviceAndIsa;
using testing::Poison;
using testing::RandomTensor;
using testing::ToDoubles;

// query[t, h, i] = qg[t, h * 2D + i]; gate[t, h * D + i] = qg[t, h * 2D + D + i].
void Reference(const Tensor& qg, int64_t heads, int64_t d, std::vector<double>& query, std::vector<double>& gate) {
  const std::vector<double> src = ToDoubles(qg);
  const int64_t tokens = qg.size(0);
  query.assign(tokens * heads * d, 0.0);
  gate.assign(tokens * heads * d, 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < d; ++i) {
        query[(t * heads + h) * d + i] = src[t * heads * 2 * d + h * 2 * d + i];
        gate[(t * heads + h) * d + i] = src[t * heads * 2 * d + h * 2 * d + d + i];
      }
    }
  }
}

// Tolerance 0: the op copies values without arithmetic.
TEST(AttnGateSplitTest, SplitsInterleavedHeadsExactly) {
  std::mt19937 rng(61);
  struct Case {
    int64_t tokens, heads, d;
  };
  const std::vector<Case> cases = {{1, 1, 4}, {5, 3, 33}, {3, 8, 256}, {2, 16, 128}};
  ForEachDeviceAndIsa([&](Device device) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Case& c : cases) {
        for (bool strided : {false, true}) {
          SCOPED_TRACE(std::string(DTypeName(dtype)) + " T " + std::to_string(c.tokens) + " H " +
                       std::to_string(c.heads) + " D " + std::to_string(c.d) + (strided ? " strided" : ""));
          Tensor qg = RandomTensor({c.tokens, c.heads * 2 * c.d}, dtype, device, rng);
          Tensor query = Tensor::Empty({c.tokens, c.heads, c.d}, dtype, device);
          Tensor gate = Tensor::Empty({c.tokens, c.heads * c.d}, dtype, device);
          if (strided) {
            qg = testing::WithPaddedRows(qg, 7);
            query = testing::WithTransposedStorage(testing::WithPaddedRows(query, 3), 0, 1);
            gate = testing::WithPaddedRows(gate, 5);
          }
          Poison(query);
          Poison(gate);
          AttnGateSplit({.qg = qg, .query = query, .gate = gate, .head_dim = c.d});
          std::vector<double> ref_query, ref_gate;
          Reference(qg, c.heads, c.d, ref_query, ref_gate);
          EXPECT_TRUE(AllClose(ref_query, query, 0.0)) << "query";
          EXPECT_TRUE(AllClose(ref_gate, gate, 0.0)) << "gate";
        }
      }
    }
  });
}

}  // namespace
}  // namespace vt
