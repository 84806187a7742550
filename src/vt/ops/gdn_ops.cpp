// Validation and dispatch of the Gated DeltaNet ops: CausalConv1d,
// CausalConv1dUpdate, GdnGates, GdnChunkedPrefill, GdnRecurrent, GdnDecode.
#include "check.h"
#include "vt/ops.h"

namespace vt {

using detail::OpCheck;

namespace {

// conv_states [num_slots, C, K-1] f32 contiguous; weight [C, K] float contiguous.
void CheckConvWeightAndState(const OpCheck& check, const Tensor& weight, const Tensor& states, int64_t channels) {
  check.Rank(weight, "weight", 2);
  check.FloatDType(weight, "weight");
  check.Contiguous(weight, "weight");
  check.Size(weight, "weight", 0, channels, "channels of x");
  const int64_t kernel = weight.size(1);
  if (!(kernel >= 2)) check.Fail("the conv kernel width must be at least 2, got " + weight.Describe());
  check.Rank(states, "conv_states", 3);
  check.DType(states, "conv_states", {DType::kF32});
  check.Contiguous(states, "conv_states");
  check.Size(states, "conv_states", 1, channels, "channels of x");
  check.Size(states, "conv_states", 2, kernel - 1, "conv kernel width - 1");
}

void CheckSequences(const OpCheck& check, const Tensor& query_start_loc, const Tensor& slot_ids) {
  check.Rank(slot_ids, "state_slot_ids", 1);
  check.DType(slot_ids, "state_slot_ids", {DType::kI32});
  check.Contiguous(slot_ids, "state_slot_ids");
  check.DType(query_start_loc, "query_start_loc", {DType::kI32});
  check.Shape(query_start_loc, "query_start_loc", {slot_ids.size(0) + 1});
  check.Contiguous(query_start_loc, "query_start_loc");
}

void CheckGdn(const char* op, const GdnArgs& a) {
  OpCheck check(op, {{"q", &a.q},
                     {"k", &a.k},
                     {"v", &a.v},
                     {"g", &a.g},
                     {"beta", &a.beta},
                     {"states", &a.states},
                     {"query_start_loc", &a.query_start_loc},
                     {"state_slot_ids", &a.state_slot_ids},
                     {"out", &a.out}});
  check.Rank(a.q, "q", 3);
  check.FloatDType(a.q, "q");
  check.LastDimContiguous(a.q, "q");
  const int64_t tokens = a.q.size(0), key_heads = a.q.size(1), key_dim = a.q.size(2);
  check.DType(a.k, "k", {a.q.dtype()});
  check.SameShape(a.k, "k", a.q, "q");
  check.LastDimContiguous(a.k, "k");
  check.Rank(a.v, "v", 3);
  check.DType(a.v, "v", {a.q.dtype()});
  check.Size(a.v, "v", 0, tokens, "tokens of q");
  check.LastDimContiguous(a.v, "v");
  const int64_t value_heads = a.v.size(1), value_dim = a.v.size(2);
  if (!(key_heads > 0 && value_heads % key_heads == 0))
    check.Fail("value heads (" + std::to_string(value_heads) + ") must be a multiple of key heads (" +
               std::to_string(key_heads) + ")");
  check.DType(a.g, "g", {DType::kF32});
  check.Shape(a.g, "g", {tokens, value_heads});
  check.Contiguous(a.g, "g");
  check.DType(a.beta, "beta", {DType::kF32});
  check.Shape(a.beta, "beta", {tokens, value_heads});
  check.Contiguous(a.beta, "beta");
  check.Rank(a.states, "states", 4);
  check.DType(a.states, "states", {DType::kF32});
  check.Contiguous(a.states, "states");
  check.Size(a.states, "states", 1, value_heads, "value heads");
  check.Size(a.states, "states", 2, key_dim, "key head dim");
  check.Size(a.states, "states", 3, value_dim, "value head dim");
  CheckSequences(check, a.query_start_loc, a.state_slot_ids);
  check.DType(a.out, "out", {a.v.dtype()});
  check.SameShape(a.out, "out", a.v, "v");
  check.LastDimContiguous(a.out, "out");
  for (const auto& [name, input] : {std::pair{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"states", &a.states}}) {
    check.NoOverlap(a.out, "out", *input, name, false);
  }
}

}  // namespace

void CausalConv1d(const CausalConv1dArgs& args) {
  OpCheck check("CausalConv1d", {{"x", &args.x},
                                 {"weight", &args.weight},
                                 {"conv_states", &args.conv_states},
                                 {"query_start_loc", &args.query_start_loc},
                                 {"state_slot_ids", &args.state_slot_ids},
                                 {"out", &args.out}});
  check.Rank(args.x, "x", 2);
  check.FloatDType(args.x, "x");
  check.LastDimContiguous(args.x, "x");
  CheckConvWeightAndState(check, args.weight, args.conv_states, args.x.size(1));
  CheckSequences(check, args.query_start_loc, args.state_slot_ids);
  check.DType(args.out, "out", {args.x.dtype()});
  check.SameShape(args.out, "out", args.x, "x");
  check.LastDimContiguous(args.out, "out");
  check.NoOverlap(args.out, "out", args.x, "x", false);
  check.NoOverlap(args.out, "out", args.conv_states, "conv_states", false);
  if (args.state_slot_ids.size(0) == 0) return;
  Dispatch<OpId::kCausalConv1d>(check.device().type, args);
}

void CausalConv1dUpdate(const CausalConv1dUpdateArgs& args) {
  OpCheck check("CausalConv1dUpdate", {{"x", &args.x},
                                       {"weight", &args.weight},
                                       {"conv_states", &args.conv_states},
                                       {"state_slot_ids", &args.state_slot_ids},
                                       {"out", &args.out}});
  check.Rank(args.x, "x", 2);
  check.FloatDType(args.x, "x");
  check.LastDimContiguous(args.x, "x");
  CheckConvWeightAndState(check, args.weight, args.conv_states, args.x.size(1));
  check.Rank(args.state_slot_ids, "state_slot_ids", 1);
  check.DType(args.state_slot_ids, "state_slot_ids", {DType::kI32});
  check.Contiguous(args.state_slot_ids, "state_slot_ids");
  check.Size(args.state_slot_ids, "state_slot_ids", 0, args.x.size(0), "one slot per row of x");
  check.DType(args.out, "out", {args.x.dtype()});
  check.SameShape(args.out, "out", args.x, "x");
  check.LastDimContiguous(args.out, "out");
  check.NoOverlap(args.out, "out", args.x, "x", true);
  check.NoOverlap(args.out, "out", args.conv_states, "conv_states", false);
  if (args.x.size(0) == 0) return;
  Dispatch<OpId::kCausalConv1dUpdate>(check.device().type, args);
}

void GdnGates(const GdnGatesArgs& args) {
  OpCheck check("GdnGates", {{"a", &args.a},
                             {"b", &args.b},
                             {"A", &args.A},
                             {"dt_bias", &args.dt_bias},
                             {"g", &args.g},
                             {"beta", &args.beta}});
  check.Rank(args.a, "a", 2);
  check.FloatDType(args.a, "a");
  check.LastDimContiguous(args.a, "a");
  check.DType(args.b, "b", {args.a.dtype()});
  check.SameShape(args.b, "b", args.a, "a");
  check.LastDimContiguous(args.b, "b");
  const int64_t heads = args.a.size(1);
  check.FloatDType(args.A, "A");
  check.Shape(args.A, "A", {heads});
  check.FloatDType(args.dt_bias, "dt_bias");
  check.Shape(args.dt_bias, "dt_bias", {heads});
  for (const auto& [name, out] : {std::pair{"g", &args.g}, {"beta", &args.beta}}) {
    check.DType(*out, name, {DType::kF32});
    check.SameShape(*out, name, args.a, "a");
    check.Contiguous(*out, name);
    check.NoOverlap(*out, name, args.a, "a", false);
    check.NoOverlap(*out, name, args.b, "b", false);
  }
  check.NoOverlap(args.g, "g", args.beta, "beta", false);
  if (args.a.numel() == 0) return;
  Dispatch<OpId::kGdnGates>(check.device().type, args);
}

void GdnChunkedPrefill(const GdnChunkedPrefillArgs& args) {
  CheckGdn("GdnChunkedPrefill", args);
  if (args.state_slot_ids.size(0) == 0) return;
  Dispatch<OpId::kGdnChunkedPrefill>(args.q.device().type, args);
}

void GdnRecurrent(const GdnRecurrentArgs& args) {
  CheckGdn("GdnRecurrent", args);
  if (args.state_slot_ids.size(0) == 0) return;
  Dispatch<OpId::kGdnRecurrent>(args.q.device().type, args);
}

void GdnDecode(const GdnDecodeArgs& args) {
  OpCheck check("GdnDecode", {{"mixed", &args.mixed},
                              {"conv_weight", &args.conv_weight},
                              {"conv_states", &args.conv_states},
                              {"a", &args.a},
                              {"b", &args.b},
                              {"A", &args.A},
                              {"dt_bias", &args.dt_bias},
                              {"states", &args.states},
                              {"state_slot_ids", &args.state_slot_ids},
                              {"z", &args.z},
                              {"norm_weight", &args.norm_weight},
                              {"out", &args.out}});
  check.Rank(args.mixed, "mixed", 2);
  check.FloatDType(args.mixed, "mixed");
  check.LastDimContiguous(args.mixed, "mixed");
  const int64_t batch = args.mixed.size(0), channels = args.mixed.size(1);
  CheckConvWeightAndState(check, args.conv_weight, args.conv_states, channels);
  check.Rank(args.out, "out", 3);
  check.DType(args.out, "out", {args.mixed.dtype()});
  check.Size(args.out, "out", 0, batch, "rows of mixed");
  check.Contiguous(args.out, "out");
  const int64_t value_heads = args.out.size(1), value_dim = args.out.size(2);
  const int64_t key_heads = args.key_heads, key_dim = args.key_dim;
  if (!(key_heads > 0 && key_dim > 0 && value_heads % key_heads == 0)) {
    check.Fail("key_heads (" + std::to_string(key_heads) + ") and key_dim (" + std::to_string(key_dim) +
               ") must be positive and divide the value heads of out (" + std::to_string(value_heads) + ")");
  }
  if (channels != 2 * key_heads * key_dim + value_heads * value_dim) {
    check.Fail("mixed must have 2 * key_heads * key_dim + value_heads * value_dim = " +
               std::to_string(2 * key_heads * key_dim + value_heads * value_dim) + " columns ([q | k | v]), got " +
               args.mixed.Describe());
  }
  for (const auto& [name, gate] : {std::pair{"a", &args.a}, {"b", &args.b}}) {
    check.DType(*gate, name, {args.mixed.dtype()});
    check.Shape(*gate, name, {batch, value_heads});
    check.LastDimContiguous(*gate, name);
  }
  check.FloatDType(args.A, "A");
  check.Shape(args.A, "A", {value_heads});
  check.FloatDType(args.dt_bias, "dt_bias");
  check.Shape(args.dt_bias, "dt_bias", {value_heads});
  check.Rank(args.states, "states", 4);
  check.DType(args.states, "states", {DType::kF32});
  check.Contiguous(args.states, "states");
  check.Size(args.states, "states", 1, value_heads, "value heads");
  check.Size(args.states, "states", 2, key_dim, "key_dim");
  check.Size(args.states, "states", 3, value_dim, "value head dim");
  check.Rank(args.state_slot_ids, "state_slot_ids", 1);
  check.DType(args.state_slot_ids, "state_slot_ids", {DType::kI32});
  check.Contiguous(args.state_slot_ids, "state_slot_ids");
  check.Size(args.state_slot_ids, "state_slot_ids", 0, batch, "one slot per row of mixed");
  check.DType(args.z, "z", {args.mixed.dtype()});
  check.SameShape(args.z, "z", args.out, "out");
  check.LastDimContiguous(args.z, "z");
  check.FloatDType(args.norm_weight, "norm_weight");
  check.Shape(args.norm_weight, "norm_weight", {value_dim});
  check.Contiguous(args.norm_weight, "norm_weight");
  for (const auto& [name, input] : {std::pair{"mixed", &args.mixed}, {"a", &args.a}, {"b", &args.b},
                                    {"z", &args.z}, {"states", &args.states}, {"conv_states", &args.conv_states}}) {
    check.NoOverlap(args.out, "out", *input, name, false);
  }
  if (batch == 0) return;
  Dispatch<OpId::kGdnDecode>(check.device().type, args);
}

}  // namespace vt
