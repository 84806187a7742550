#include "vllm/core/scheduler_output_codec.h"

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "vt/error.h"

namespace vllm {
namespace {

// Each struct's fields, once for both directions: `io` is a Writer (const objects)
// or a Reader, called on every field in order.
template <typename Io, typename S>
void Fields(Io& io, S& s)
  requires std::is_same_v<std::remove_const_t<S>, StructuredOutputsParams>
{
  io(s.json), io(s.regex), io(s.choice), io(s.grammar), io(s.json_object), io(s.prebuilt_key);
  io(s.disable_any_whitespace);
}

template <typename Io, typename P>
void Fields(Io& io, P& p)
  requires std::is_same_v<std::remove_const_t<P>, SamplingParams>
{
  io(p.temperature), io(p.top_p), io(p.top_k), io(p.min_p), io(p.repetition_penalty), io(p.presence_penalty);
  io(p.frequency_penalty), io(p.seed), io(p.max_tokens), io(p.min_tokens), io(p.stop), io(p.stop_token_ids);
  io(p.ignore_eos), io(p.include_stop_str_in_output), io(p.skip_special_tokens), io(p.logprobs);
  io(p.prompt_logprobs), io(p.logit_bias), io(p.allowed_token_ids), io(p.bad_words_token_ids), io(p.output_kind);
  io(p.structured_outputs);
}

template <typename Io, typename R>
void Fields(Io& io, R& r)
  requires std::is_same_v<std::remove_const_t<R>, NewRequestData>
{
  io(r.req_id), io(r.prompt_token_ids), io(r.sampling_params), io(r.eos_token_ids), io(r.block_ids);
  io(r.state_slot), io(r.num_computed_tokens);
}

template <typename Io, typename R>
void Fields(Io& io, R& r)
  requires std::is_same_v<std::remove_const_t<R>, CachedRequestData>
{
  io(r.req_id), io(r.resumed_from_preemption), io(r.new_token_ids), io(r.new_block_ids), io(r.state_slot);
  io(r.num_computed_tokens);
}

template <typename Io, typename C>
void Fields(Io& io, C& c)
  requires std::is_same_v<std::remove_const_t<C>, StateSnapshotCopy>
{
  io(c.state_slot), io(c.snapshot);
}

template <typename Io, typename O>
void Fields(Io& io, O& o)
  requires std::is_same_v<std::remove_const_t<O>, SchedulerOutput>
{
  io(o.scheduled_new_reqs), io(o.scheduled_cached_reqs), io(o.num_scheduled_tokens);
  io(o.total_num_scheduled_tokens), io(o.preempted_req_ids), io(o.finished_req_ids), io(o.state_snapshot_loads);
  io(o.state_snapshot_saves), io(o.structured_output_request_ids), io(o.grammar_bitmask);
  io(o.grammar_bitmask_words), io(o.scheduled_spec_decode_tokens);
}

template <typename T>
concept Scalar = std::is_arithmetic_v<T> || std::is_enum_v<T>;

// Host byte order on both ends: the ranks run the same binary on one host.
class Writer {
 public:
  template <Scalar T>
  void operator()(const T& value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void operator()(const std::string& s) {
    (*this)(static_cast<uint64_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  template <typename T>
  void operator()(const std::vector<T>& v) {
    (*this)(static_cast<uint64_t>(v.size()));
    for (const T& x : v) (*this)(x);
  }
  template <typename K, typename V>
  void operator()(const std::unordered_map<K, V>& m) {
    // Sorted, so equal maps give equal bytes.
    const std::map<K, V> sorted(m.begin(), m.end());
    (*this)(static_cast<uint64_t>(sorted.size()));
    for (const auto& [k, v] : sorted) (*this)(k), (*this)(v);
  }
  template <typename A, typename B>
  void operator()(const std::pair<A, B>& p) {
    (*this)(p.first), (*this)(p.second);
  }
  template <typename T>
  void operator()(const std::optional<T>& o) {
    (*this)(static_cast<uint8_t>(o.has_value()));
    if (o) (*this)(*o);
  }
  template <typename S>
    requires(!Scalar<S>)
  void operator()(const S& s) {
    Fields(*this, s);
  }
  std::vector<uint8_t> Take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  template <Scalar T>
  void operator()(T& value) {
    if (sizeof(T) > bytes_.size() - at_) Truncated();
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
  }
  void operator()(bool& value) {
    uint8_t b = 0;
    (*this)(b);
    value = b != 0;
  }
  void operator()(std::string& s) {
    const uint64_t n = Count();
    s.assign(reinterpret_cast<const char*>(bytes_.data() + at_), n);
    at_ += n;
  }
  template <typename T>
  void operator()(std::vector<T>& v) {
    v.resize(Count());
    for (T& x : v) (*this)(x);
  }
  template <typename K, typename V>
  void operator()(std::unordered_map<K, V>& m) {
    const uint64_t n = Count();
    m.clear();
    for (uint64_t i = 0; i < n; ++i) {
      K k{};
      V v{};
      (*this)(k), (*this)(v);
      m.emplace(std::move(k), std::move(v));
    }
  }
  template <typename A, typename B>
  void operator()(std::pair<A, B>& p) {
    (*this)(p.first), (*this)(p.second);
  }
  template <typename T>
  void operator()(std::optional<T>& o) {
    bool has = false;
    (*this)(has);
    o.reset();
    if (has) (*this)(o.emplace());
  }
  template <typename S>
    requires(!Scalar<S>)
  void operator()(S& s) {
    Fields(*this, s);
  }
  void ExpectEnd() const {
    if (at_ != bytes_.size()) {
      throw vt::Error("scheduler output: " + std::to_string(bytes_.size() - at_) + " bytes left after byte " +
                      std::to_string(at_));
    }
  }

 private:
  // An element count; every element takes at least one byte, so a count larger than
  // the bytes left is a truncated (or corrupt) message.
  uint64_t Count() {
    uint64_t n = 0;
    (*this)(n);
    if (n > bytes_.size() - at_) Truncated();
    return n;
  }
  [[noreturn]] void Truncated() const {
    throw vt::Error("scheduler output: " + std::to_string(bytes_.size()) + " bytes, truncated at byte " +
                    std::to_string(at_));
  }
  const std::vector<uint8_t>& bytes_;
  size_t at_ = 0;
};

}  // namespace

std::vector<uint8_t> EncodeSchedulerOutput(const SchedulerOutput& output) {
  if (output.await_grammar_bitmask) output.await_grammar_bitmask();
  Writer w;
  w(output);
  return w.Take();
}

SchedulerOutput DecodeSchedulerOutput(const std::vector<uint8_t>& bytes) {
  SchedulerOutput output;
  Reader r(bytes);
  r(output);
  r.ExpectEnd();
  return output;
}

}  // namespace vllm
