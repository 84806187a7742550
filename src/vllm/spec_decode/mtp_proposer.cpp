#include "vllm/spec_decode/mtp_proposer.h"

#include <algorithm>
#include <stdexcept>

#include "vt/ops.h"
#include "vt/reach.h"
#include "worker/packed_upload.h"

namespace vllm {
namespace {

// One MTP forward's sequences, built on the host: sequence b computes positions
// [first_position, first_position + n) with its request's block table.
struct HeadBatch {
  std::vector<int32_t> hidden_rows, next_ids, positions, slot_mapping, seq_lens, query_start_loc = {0};
  std::vector<int32_t> block_tables, logits_rows;
  std::vector<const std::vector<int32_t>*> tables;
  int64_t max_blocks = 1, max_query_len = 0, max_seq_len = 0, num_decodes = 0;
  bool decodes_only_so_far = true;

  void Add(const std::vector<int32_t>& blocks, int64_t first_position, int64_t block_size,
           const std::vector<int32_t>& rows, const std::vector<int32_t>& next) {
    const int64_t n = static_cast<int64_t>(rows.size());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = first_position + i;
      positions.push_back(static_cast<int32_t>(pos));
      slot_mapping.push_back(static_cast<int32_t>(blocks.at(pos / block_size) * block_size + pos % block_size));
    }
    hidden_rows.insert(hidden_rows.end(), rows.begin(), rows.end());
    next_ids.insert(next_ids.end(), next.begin(), next.end());
    seq_lens.push_back(static_cast<int32_t>(first_position + n));
    query_start_loc.push_back(static_cast<int32_t>(hidden_rows.size()));
    tables.push_back(&blocks);
    max_blocks = std::max<int64_t>(max_blocks, static_cast<int64_t>(blocks.size()));
    max_query_len = std::max(max_query_len, n);
    max_seq_len = std::max(max_seq_len, first_position + n);
    decodes_only_so_far = decodes_only_so_far && n == 1;
    if (decodes_only_so_far) ++num_decodes;
  }
  int64_t num_seqs() const { return static_cast<int64_t>(seq_lens.size()); }

  // Uploads the metadata; hidden rows, next ids and logits rows come back as views.
  AttnMetadata Upload(vt::Device device, vt::Tensor& rows, vt::Tensor& ids, vt::Tensor& logits) {
    const int64_t B = num_seqs(), T = static_cast<int64_t>(hidden_rows.size());
    block_tables.assign(B * max_blocks, 0);
    for (int64_t b = 0; b < B; ++b) std::copy(tables[b]->begin(), tables[b]->end(), block_tables.begin() + b * max_blocks);
    PackedUpload packed;
    const int64_t at_rows = packed.Add(hidden_rows), at_ids = packed.Add(next_ids), at_logits = packed.Add(logits_rows);
    const int64_t at_pos = packed.Add(positions), at_slots = packed.Add(slot_mapping);
    const int64_t at_tables = packed.Add(block_tables), at_lens = packed.Add(seq_lens);
    const int64_t at_qsl = packed.Add(query_start_loc);
    packed.Upload(device);
    rows = packed.Take(at_rows, {T});
    ids = packed.Take(at_ids, {T});
    logits = packed.Take(at_logits, {static_cast<int64_t>(logits_rows.size())});
    AttnMetadata m;
    m.positions = packed.Take(at_pos, {T});
    m.slot_mapping = packed.Take(at_slots, {T});
    m.block_tables = packed.Take(at_tables, {B, max_blocks});
    m.seq_lens = packed.Take(at_lens, {B});
    m.query_start_loc = packed.Take(at_qsl, {B + 1});
    m.num_tokens = T;
    m.num_seqs = B;
    m.num_decodes = num_decodes;
    m.max_query_len = max_query_len;
    m.max_seq_len = max_seq_len;
    return m;
  }
};

std::vector<int32_t> Iota(int64_t first, int64_t n) {
  std::vector<int32_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(first + i);
  return v;
}

}  // namespace

MtpProposer::MtpProposer(const DecoderModel& trunk, std::unique_ptr<MtpHead> head, int64_t num_speculative_tokens,
                         int64_t mtp_kv_layer)
    : trunk_(trunk), head_(std::move(head)), num_speculative_tokens_(num_speculative_tokens),
      mtp_kv_layer_(mtp_kv_layer) {
  if (num_speculative_tokens < 1) {
    throw std::invalid_argument("MtpProposer: num_speculative_tokens must be >= 1, got " +
                                std::to_string(num_speculative_tokens));
  }
}

vt::Tensor MtpProposer::Forward(const ForwardBatch& batch, const ModelCaches& caches, bool record_gdn) {
  gdn_projected_.clear();
  hidden_ = trunk_.ForwardHidden(batch, caches, record_gdn ? &gdn_projected_ : nullptr);
  return trunk_.LmHead(hidden_, batch.logits_indices);
}

void MtpProposer::ReplayGdnStates(const vt::Tensor& rows, const AttnMetadata& meta, const ModelCaches& caches) const {
  if (gdn_projected_.empty()) throw std::logic_error("MtpProposer: the last Forward recorded no GDN inputs");
  trunk_.ReplayGdnStates(gdn_projected_, rows, meta, caches);
}

std::unordered_map<std::string, std::vector<int32_t>> MtpProposer::Propose(
    const InputBatch& batch, const std::vector<std::vector<int32_t>>& produced, const std::vector<bool>& drafts,
    const ModelCaches& caches, int64_t block_size) {
  vt::reach::Hit("MtpProposer::Propose");
  const vt::Device dev = trunk_.device();
  const LayerKvCache& kv = caches.kv.at(mtp_kv_layer_);
  // Pass 1: every row whose next token is known now.
  HeadBatch first;
  std::vector<int64_t> drafting;       // batch indices that draft
  std::vector<int64_t> last_position;  // their last row's position
  int64_t trunk_row = 0;
  for (int64_t b = 0; b < batch.size(); ++b) {
    const BatchRequest& s = batch.requests[b];
    const int64_t c = s.num_computed_tokens(), known = s.num_known_scheduled_tokens();
    const std::vector<int32_t>& all = s.request().all_token_ids();
    std::vector<int32_t> next;
    if (s.num_draft_tokens() > 0) {
      next = produced[b];  // row i (the last known token, then draft i) is followed by produced[i]
    } else {
      for (int64_t i = 0; i + 1 < known; ++i) next.push_back(all[c + i + 1]);
      next.push_back(produced[b].empty() ? all.at(c + known) : produced[b][0]);
    }
    const int64_t n = static_cast<int64_t>(next.size());
    first.Add(s.block_ids(), c, block_size, Iota(trunk_row, n), next);
    if (drafts[b] && !produced[b].empty()) {
      first.logits_rows.push_back(first.query_start_loc.back() - 1);
      drafting.push_back(b);
      last_position.push_back(c + n - 1);
    }
    trunk_row += s.num_scheduled_tokens;
  }
  vt::Tensor rows, ids, logits_rows;
  AttnMetadata meta = first.Upload(dev, rows, ids, logits_rows);
  const int64_t H = hidden_.size(1);
  vt::Tensor head_in = vt::Tensor::Empty({rows.size(0), H}, hidden_.dtype(), dev);
  vt::GatherRows({.table = hidden_, .ids = rows, .out = head_in});
  vt::Tensor head_out;
  vt::Tensor logits = head_->Forward(head_in, ids, meta, kv, logits_rows, &head_out);  // [D, V]

  std::unordered_map<std::string, std::vector<int32_t>> result;
  if (drafting.empty()) return result;
  auto argmax = [&](const vt::Tensor& l) {
    vt::Tensor out = vt::Tensor::Empty({l.size(0)}, vt::DType::kI32, l.device());
    vt::Argmax({.x = l, .out = out});
    return out.ToIntVector();
  };
  std::vector<int64_t> tokens = argmax(logits);
  // The head's output hidden state at each drafting request's last row: the input of
  // its next draft. Row r of draft_hidden belongs to batch request drafting[r].
  vt::Tensor draft_hidden = vt::Tensor::Empty({logits_rows.size(0), H}, head_out.dtype(), dev);
  vt::GatherRows({.table = head_out, .ids = logits_rows, .out = draft_hidden});
  for (size_t i = 0; i < drafting.size(); ++i) {
    result[batch.requests[drafting[i]].req_id()].push_back(static_cast<int32_t>(tokens[i]));
  }
  for (int64_t m = 2; m <= num_speculative_tokens_; ++m) {
    // Draft m runs the head at position last + m - 1 from draft m - 1.
    HeadBatch step;
    std::vector<int64_t> still, still_last;
    for (size_t r = 0; r < drafting.size(); ++r) {
      const BatchRequest& s = batch.requests[drafting[r]];
      const int64_t pos = last_position[r] + m - 1;
      if (pos >= static_cast<int64_t>(s.block_ids().size()) * block_size) continue;  // no slot for it
      step.Add(s.block_ids(), pos, block_size, {static_cast<int32_t>(r)}, {result[s.req_id()].back()});
      step.logits_rows.push_back(static_cast<int32_t>(still.size()));
      still.push_back(drafting[r]);
      still_last.push_back(last_position[r]);
    }
    if (still.empty()) break;
    vt::Tensor step_rows, step_ids, step_logits_rows;
    AttnMetadata step_meta = step.Upload(dev, step_rows, step_ids, step_logits_rows);
    vt::Tensor step_in = vt::Tensor::Empty({step_rows.size(0), H}, draft_hidden.dtype(), dev);
    vt::GatherRows({.table = draft_hidden, .ids = step_rows, .out = step_in});
    tokens = argmax(head_->Forward(step_in, step_ids, step_meta, kv, step_logits_rows, &draft_hidden));
    for (size_t i = 0; i < still.size(); ++i) {
      result[batch.requests[still[i]].req_id()].push_back(static_cast<int32_t>(tokens[i]));
    }
    drafting = still;
    last_position = still_last;
  }
  return result;
}

}  // namespace vllm
