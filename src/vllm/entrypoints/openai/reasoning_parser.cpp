#include "reasoning_parser.h"

#include <cctype>

#include "tool_parsers/call_scanner.h"

namespace vllm::openai {
namespace {

constexpr std::string_view kThink = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kToolCall = "<tool_call>";

}  // namespace

const std::vector<std::string>& ReasoningParserNames() {
  static const std::vector<std::string> names = {"qwen3"};
  return names;
}

ReasoningDelta ReasoningParser::Feed(std::string_view text) {
  pending_.append(text);
  ReasoningDelta out;
  Scan(false, out);
  return out;
}

ReasoningDelta ReasoningParser::Finish() {
  ReasoningDelta out;
  Scan(true, out);
  return out;
}

void ReasoningParser::Scan(bool end, ReasoningDelta& out) {
  for (bool progress = true; progress;) {
    progress = false;
    if (state_ == State::kStart) {
      size_t at = 0;
      while (at < pending_.size() && std::isspace(static_cast<unsigned char>(pending_[at]))) ++at;
      const std::string_view rest = std::string_view(pending_).substr(at);
      if (rest.substr(0, kThink.size()) == kThink) {
        pending_.erase(0, at + kThink.size());
        state_ = State::kReasoning;
        progress = true;
      } else if (end || rest.size() >= kThink.size() || kThink.substr(0, rest.size()) != rest) {
        state_ = State::kContent;  // the output does not open with <think>: all of it is content
        progress = true;
      }
    } else if (state_ == State::kReasoning) {
      const size_t close = pending_.find(kThinkEnd), call = pending_.find(kToolCall);
      if (close != std::string::npos && close < call) {
        out.reasoning += pending_.substr(0, close);
        pending_.erase(0, close + kThinkEnd.size());
        state_ = State::kAfterThink;
        progress = true;
      } else if (call != std::string::npos) {
        out.reasoning += pending_.substr(0, call);
        pending_.erase(0, call);  // the call itself is content
        state_ = State::kContent;
        progress = true;
      } else {
        const size_t keep =
            end ? 0 : std::max(PartialTagSuffix(pending_, kThinkEnd), PartialTagSuffix(pending_, kToolCall));
        out.reasoning += pending_.substr(0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
      }
    } else if (state_ == State::kAfterThink) {
      size_t at = 0;
      while (at < pending_.size() && pending_[at] == '\n') ++at;
      pending_.erase(0, at);
      if (!pending_.empty()) {
        state_ = State::kContent;
        progress = true;
      }
    } else {
      out.content += pending_;
      pending_.clear();
    }
  }
}

}  // namespace vllm::openai
