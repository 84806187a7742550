// Validation and dispatch of the attention ops: AttnGateSplit, RopeNeox,
// WriteKvCache, PagedAttention.
#include "check.h"
#include "vt/ops.h"

namespace vt {

using detail::OpCheck;

namespace {

// The largest head dim any backend's paged attention supports; kernels take any
// D up to this, so no kernel choice can route a supported shape to a gap.
constexpr int64_t kMaxHeadDim = 256;

void CheckCache(const OpCheck& check, const Tensor& cache, const char* name) {
  check.Rank(cache, name, 4);
  check.FloatDType(cache, name);
  check.LastDimContiguous(cache, name);
}

void CheckKvCachePair(const OpCheck& check, const Tensor& k_cache, const Tensor& v_cache) {
  CheckCache(check, k_cache, "k_cache");
  CheckCache(check, v_cache, "v_cache");
  check.DType(v_cache, "v_cache", {k_cache.dtype()});
  check.SameShape(v_cache, "v_cache", k_cache, "k_cache");
  if (k_cache.Overlaps(v_cache) && k_cache.is_contiguous())
    check.Fail("k_cache and v_cache must not be the same memory (" + k_cache.Describe() + ", " + v_cache.Describe() +
               ")");
}

}  // namespace

void AttnGateSplit(const AttnGateSplitArgs& args) {
  OpCheck check("AttnGateSplit", {{"qg", &args.qg}, {"query", &args.query}, {"gate", &args.gate}});
  check.Rank(args.qg, "qg", 2);
  check.FloatDType(args.qg, "qg");
  check.LastDimContiguous(args.qg, "qg");
  if (!(args.head_dim > 0 && args.qg.size(1) % (2 * args.head_dim) == 0))
    check.Fail("qg's width must be heads * 2 * head_dim with head_dim " + std::to_string(args.head_dim) + ", got " +
               args.qg.Describe());
  const int64_t tokens = args.qg.size(0), heads = args.qg.size(1) / (2 * args.head_dim);
  check.DType(args.query, "query", {args.qg.dtype()});
  check.Shape(args.query, "query", {tokens, heads, args.head_dim});
  check.LastDimContiguous(args.query, "query");
  check.DType(args.gate, "gate", {args.qg.dtype()});
  check.Shape(args.gate, "gate", {tokens, heads * args.head_dim});
  check.LastDimContiguous(args.gate, "gate");
  check.NoOverlap(args.query, "query", args.qg, "qg", false);
  check.NoOverlap(args.gate, "gate", args.qg, "qg", false);
  check.NoOverlap(args.gate, "gate", args.query, "query", false);
  if (tokens == 0) return;
  Dispatch<OpId::kAttnGateSplit>(check.device().type, args);
}

void RopeNeox(const RopeNeoxArgs& args) {
  OpCheck check("RopeNeox", {{"x", &args.x}, {"positions", &args.positions}});
  check.Rank(args.x, "x", 3);
  check.FloatDType(args.x, "x");
  check.LastDimContiguous(args.x, "x");
  check.Rank(args.positions, "positions", 1);
  check.IndexDType(args.positions, "positions");
  check.Size(args.positions, "positions", 0, args.x.size(0), "tokens of x");
  if (!(args.rotary_dim >= 0 && args.rotary_dim % 2 == 0 && args.rotary_dim <= args.x.size(2)))
    check.Fail("rotary_dim must be even and within [0, head_dim " + std::to_string(args.x.size(2)) + "], got " +
               std::to_string(args.rotary_dim));
  if (!(args.theta > 0)) check.Fail("theta must be positive, got " + std::to_string(args.theta));
  // Width 0 means no rotation (NoPE): no kernel ever sees an empty launch.
  if (args.rotary_dim == 0 || args.x.numel() == 0) return;
  Dispatch<OpId::kRopeNeox>(check.device().type, args);
}

void WriteKvCache(const WriteKvCacheArgs& args) {
  OpCheck check("WriteKvCache", {{"k", &args.k},
                                 {"v", &args.v},
                                 {"k_cache", &args.k_cache},
                                 {"v_cache", &args.v_cache},
                                 {"slot_mapping", &args.slot_mapping}});
  check.Rank(args.k, "k", 3);
  check.FloatDType(args.k, "k");
  check.LastDimContiguous(args.k, "k");
  check.DType(args.v, "v", {args.k.dtype()});
  check.SameShape(args.v, "v", args.k, "k");
  check.LastDimContiguous(args.v, "v");
  CheckKvCachePair(check, args.k_cache, args.v_cache);
  check.Size(args.k_cache, "k_cache", 2, args.k.size(1), "kv heads of k");
  check.Size(args.k_cache, "k_cache", 3, args.k.size(2), "head dim of k");
  check.Rank(args.slot_mapping, "slot_mapping", 1);
  check.IndexDType(args.slot_mapping, "slot_mapping");
  check.Size(args.slot_mapping, "slot_mapping", 0, args.k.size(0), "tokens of k");
  check.NoOverlap(args.k_cache, "k_cache", args.k, "k", false);
  check.NoOverlap(args.k_cache, "k_cache", args.v, "v", false);
  check.NoOverlap(args.v_cache, "v_cache", args.k, "k", false);
  check.NoOverlap(args.v_cache, "v_cache", args.v, "v", false);
  if (args.k.size(0) == 0) return;
  Dispatch<OpId::kWriteKvCache>(check.device().type, args);
}

void PagedAttention(const PagedAttentionArgs& args) {
  OpCheck check("PagedAttention", {{"q", &args.q},
                                   {"k_cache", &args.k_cache},
                                   {"v_cache", &args.v_cache},
                                   {"block_tables", &args.block_tables},
                                   {"seq_lens", &args.seq_lens},
                                   {"query_start_loc", &args.query_start_loc},
                                   {"out", &args.out}});
  check.Rank(args.q, "q", 3);
  check.FloatDType(args.q, "q");
  check.LastDimContiguous(args.q, "q");
  const int64_t num_heads = args.q.size(1), head_dim = args.q.size(2);
  if (!(head_dim > 0 && head_dim <= kMaxHeadDim))
    check.Fail("head_dim must be in [1, " + std::to_string(kMaxHeadDim) + "], got " + args.q.Describe());
  CheckKvCachePair(check, args.k_cache, args.v_cache);
  check.Size(args.k_cache, "k_cache", 3, head_dim, "head dim of q");
  const int64_t num_kv_heads = args.k_cache.size(2);
  if (!(num_kv_heads > 0 && num_heads % num_kv_heads == 0))
    check.Fail("query heads (" + std::to_string(num_heads) + ") must be a multiple of kv heads (" +
               std::to_string(num_kv_heads) + ")");
  check.Rank(args.block_tables, "block_tables", 2);
  check.DType(args.block_tables, "block_tables", {DType::kI32});
  check.LastDimContiguous(args.block_tables, "block_tables");
  const int64_t num_seqs = args.block_tables.size(0);
  check.DType(args.seq_lens, "seq_lens", {DType::kI32});
  check.Shape(args.seq_lens, "seq_lens", {num_seqs});
  check.Contiguous(args.seq_lens, "seq_lens");
  check.DType(args.query_start_loc, "query_start_loc", {DType::kI32});
  check.Shape(args.query_start_loc, "query_start_loc", {num_seqs + 1});
  check.Contiguous(args.query_start_loc, "query_start_loc");
  check.DType(args.out, "out", {args.q.dtype()});
  check.SameShape(args.out, "out", args.q, "q");
  check.LastDimContiguous(args.out, "out");
  check.NoOverlap(args.out, "out", args.q, "q", false);
  if (!(args.scale > 0)) check.Fail("scale must be positive, got " + std::to_string(args.scale));
  if (!(args.max_query_len >= 0 && args.max_seq_len >= args.max_query_len))
    check.Fail("need 0 <= max_query_len <= max_seq_len, got " + std::to_string(args.max_query_len) + " and " +
               std::to_string(args.max_seq_len));
  if (!(args.max_seq_len <= args.block_tables.size(1) * args.k_cache.size(1)))
    check.Fail("max_seq_len " + std::to_string(args.max_seq_len) + " exceeds what block_tables can address (" +
               std::to_string(args.block_tables.size(1)) + " blocks of " + std::to_string(args.k_cache.size(1)) + ")");
  if (args.q.size(0) == 0 || num_seqs == 0) return;
  Dispatch<OpId::kPagedAttention>(check.device().type, args);
}

}  // namespace vt
