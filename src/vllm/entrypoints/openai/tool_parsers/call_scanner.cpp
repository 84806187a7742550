#include "call_scanner.h"

#include <cctype>

namespace vllm::openai {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

}  // namespace

size_t PartialTagSuffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

ParsedDelta CallScanner::Feed(std::string_view text) {
  pending_.append(text);
  ParsedDelta out;
  Scan(false, out);
  return out;
}

ParsedDelta CallScanner::Finish() {
  ParsedDelta out;
  Scan(true, out);
  return out;
}

void CallScanner::Scan(bool end, ParsedDelta& out) {
  for (bool progress = true; progress;) {
    switch (state_) {
      case State::kContent: progress = ScanContent(end, out); break;
      case State::kCall: progress = ScanCall(end, out); break;
      case State::kAfterCall: progress = ScanAfterCall(end, out); break;
    }
  }
}

bool CallScanner::ScanContent(bool end, ParsedDelta& out) {
  const size_t at = pending_.find(kOpen);
  if (at != std::string::npos) {
    out.content += pending_.substr(0, at);
    pending_.erase(0, at + kOpen.size());
    state_ = State::kCall;
    body_ = make_body_(tools_);
    status_ = CallBody::Status::kUndecided;
    return true;
  }
  const size_t keep = end ? 0 : PartialTagSuffix(pending_, kOpen);
  out.content += pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return false;
}

bool CallScanner::ScanCall(bool end, ParsedDelta& out) {
  const size_t close = pending_.find(kClose);
  const bool closed = close != std::string::npos;
  const size_t keep = closed || end ? 0 : PartialTagSuffix(pending_, kClose);
  const std::string_view body = std::string_view(pending_).substr(0, closed ? close : pending_.size() - keep);
  UpdateCall(body, closed || end, out);
  if (status_ == CallBody::Status::kNotACall || (status_ == CallBody::Status::kUndecided && (closed || end))) {
    // Not a call: the tag goes to content, the text after it is scanned as content.
    out.content += kOpen;
    state_ = State::kContent;
    return true;
  }
  if (!closed && !end) return false;
  if (status_ == CallBody::Status::kCall) ++next_index_;
  pending_.erase(0, closed ? close + kClose.size() : pending_.size());
  state_ = State::kAfterCall;
  return closed;  // at the end of an unclosed call nothing is left
}

bool CallScanner::ScanAfterCall(bool end, ParsedDelta& /*out*/) {
  size_t first = 0;
  while (first < pending_.size() && IsSpace(pending_[first])) ++first;
  const std::string_view rest = std::string_view(pending_).substr(first);
  if (rest.empty()) {
    if (end) pending_.clear();  // whitespace after the last call is dropped
    return false;
  }
  if (rest.substr(0, std::min(rest.size(), kOpen.size())) == kOpen.substr(0, std::min(rest.size(), kOpen.size()))) {
    if (rest.size() < kOpen.size() && !end) return false;  // may be the next call's tag
    if (rest.size() >= kOpen.size()) pending_.erase(0, first);  // whitespace between calls is dropped
  }
  state_ = State::kContent;
  return true;
}

void CallScanner::UpdateCall(std::string_view body, bool end, ParsedDelta& out) {
  ToolCallDelta delta;
  delta.index = next_index_;
  const CallBody::Status status = body_->Update(body, end, delta);
  if (status_ != CallBody::Status::kCall) status_ = status;
  if (status_ != CallBody::Status::kCall) return;
  if (delta.name) delta.id = "call_" + id_prefix_ + std::to_string(delta.index);
  if (delta.name || !delta.arguments.empty()) out.tool_calls.push_back(std::move(delta));
}

}  // namespace vllm::openai
