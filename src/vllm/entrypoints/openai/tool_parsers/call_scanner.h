// The part both tool-call formats share: text outside <tool_call>...</tool_call> is
// content (a tag's possible start held back until decided; whitespace-only text
// after a call dropped, as vLLM drops it), and each call's body goes to a
// format-specific CallBody as it grows.
//
//   content --"<tool_call>"--> call --"</tool_call>"--> after call --text--> content
//                                                          |--"<tool_call>"--> call
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "tool_parser.h"

namespace vllm::openai {

// One call's body (the text after <tool_call>).
class CallBody {
 public:
  enum class Status {
    kUndecided,  // nothing sent yet, and the text may still become a call
    kCall,       // it is a call (its first delta was, or is now, sent)
    kNotACall,   // the text is not a call: it goes back to content (only before kCall)
  };
  virtual ~CallBody() = default;
  // `body`: all of the body so far; `end`: </tool_call> was seen, or generation
  // ended, so nothing more comes. Fills `delta` (id and name the first time) with
  // what can be sent now.
  virtual Status Update(std::string_view body, bool end, ToolCallDelta& delta) = 0;
};

using CallBodyFactory = std::function<std::unique_ptr<CallBody>(const nlohmann::json& tools)>;
std::unique_ptr<CallBody> MakeQwen3CoderBody(const nlohmann::json& tools);
std::unique_ptr<CallBody> MakeHermesBody(const nlohmann::json& tools);

class CallScanner : public ToolParser {
 public:
  CallScanner(CallBodyFactory make_body, nlohmann::json tools, std::string id_prefix)
      : make_body_(std::move(make_body)), tools_(std::move(tools)), id_prefix_(std::move(id_prefix)) {}
  ParsedDelta Feed(std::string_view text) override;
  ParsedDelta Finish() override;

 private:
  enum class State { kContent, kCall, kAfterCall };
  void Scan(bool end, ParsedDelta& out);
  bool ScanContent(bool end, ParsedDelta& out);  // false: wait for more text
  bool ScanCall(bool end, ParsedDelta& out);
  bool ScanAfterCall(bool end, ParsedDelta& out);
  void UpdateCall(std::string_view body, bool end, ParsedDelta& out);

  CallBodyFactory make_body_;
  nlohmann::json tools_;
  std::string id_prefix_;
  State state_ = State::kContent;
  std::string pending_;  // text not yet decided
  std::unique_ptr<CallBody> body_;
  CallBody::Status status_ = CallBody::Status::kUndecided;
  int next_index_ = 0;
};

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t PartialTagSuffix(std::string_view text, std::string_view tag);

}  // namespace vllm::openai
