// Streaming detokenization: the text of a growing list of generated tokens, handed
// out as it becomes final.
//
// A byte-level BPE token may end in the middle of a UTF-8 character (an emoji is often
// two or three tokens). The detokenizer keeps the bytes of an unfinished character
// back until a later token completes it, so it never emits half a character or a
// spurious U+FFFD; bytes that can never form a character are emitted as U+FFFD at
// once. Without a prompt, the concatenation of everything Add() and Finish() return
// equals Tokenizer::Decode of all the ids. (vLLM's detokenizer likewise holds text back
// while it would end in an incomplete character.)
//
// An id past the tokenizer's vocabulary (a model's embedding often has padding rows
// beyond it: 151936 rows for Qwen3's 151669 tokens) adds no text, as in vLLM and HF
// `tokenizers`, and as GGUF's unused padding slots do; a negative id is an error.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "vllm/tokenizer/tokenizer.h"

namespace vllm {

class IncrementalDetokenizer {
 public:
  // `prompt_ids`: the prompt, whose trailing unfinished character (if any) the first
  // generated tokens may complete. Nothing of the prompt is emitted otherwise.
  explicit IncrementalDetokenizer(Tokenizer tokenizer, bool skip_special_tokens = true,
                                  std::span<const int32_t> prompt_ids = {});

  // Takes new token ids; returns the text that they made final (possibly empty).
  std::string Add(std::span<const int32_t> ids);
  std::string Add(int32_t id) { return Add(std::span<const int32_t>(&id, 1)); }
  // End of the stream: returns what was held back, an unfinished character as U+FFFD.
  std::string Finish();

  // Everything emitted so far.
  const std::string& output_text() const { return output_text_; }
  // Bytes of an unfinished character held back (0 to 3).
  size_t num_held_bytes() const { return held_.size(); }

 private:
  std::string TakeFinalText();

  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::string held_;  // raw bytes not yet emitted
  std::string output_text_;
};

}  // namespace vllm
