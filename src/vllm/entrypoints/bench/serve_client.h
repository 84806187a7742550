// One streamed OpenAI-protocol request as `vllm-cpp bench serve` sends it, and what
// it measured. Only the protocol is assumed (SSE `data:` events, `[DONE]`, an
// optional final usage chunk), so the same client measures vllm-cpp, vLLM or
// llama-server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vllm::bench {

// Where the requests go: scheme://host[:port] for the client, and the path prefix
// of --base-url joined with --endpoint.
struct ServeTarget {
  std::string scheme_host_port;  // "http://127.0.0.1:8000"
  std::string path;              // "/v1/completions"
  std::string api_key;           // sent as "Authorization: Bearer KEY" when not empty
  double timeout_s = 600;        // connect and each read
};
// Throws CliError for a URL that is not http://HOST[:PORT][/PREFIX].
ServeTarget ParseServeTarget(const std::string& base_url, const std::string& endpoint);

struct ServeRequestResult {
  bool success = false;
  std::string error;                  // why it failed ("" on success)
  double start_s = 0;                 // when it was sent, from the start of the run
  double ttft_s = 0;                  // first event with choices
  double latency_s = 0;               // until [DONE]
  std::vector<double> itl_s;          // gaps between later events with choices
  int64_t prompt_tokens = 0;          // the usage chunk's, else the ids sent
  int64_t output_tokens = 0;          // the usage chunk's, else events with choices
  std::string output_text;            // the streamed text (choices[0].text or .delta.content)
};

// POSTs `body` (stream: true is set here) and reads the event stream to its end.
// A status other than 200, a connection that drops or times out, an error event
// or a stream without [DONE] is a failure, with its reason; nothing throws.
ServeRequestResult SendStreamingRequest(const ServeTarget& target, nlohmann::json body, int64_t prompt_tokens_sent);

}  // namespace vllm::bench
