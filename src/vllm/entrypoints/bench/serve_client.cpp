#include "serve_client.h"

#include <httplib.h>

#include <chrono>
#include <regex>

#include "bench_report.h"

namespace vllm::bench {
namespace {

using nlohmann::json;

// Splits an SSE body into `data:` payloads as bytes arrive (events end with a blank
// line; a payload may arrive in pieces).
class EventReader {
 public:
  template <typename OnEvent>
  void Feed(const char* data, size_t size, OnEvent&& on_event) {
    buffer_.append(data, size);
    for (size_t end; (end = buffer_.find("\n\n")) != std::string::npos;) {
      std::string event = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      for (size_t at = 0; at < event.size();) {
        size_t line_end = event.find('\n', at);
        if (line_end == std::string::npos) line_end = event.size();
        std::string line = event.substr(at, line_end - at);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.rfind("data:", 0) == 0) on_event(line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5));
        at = line_end + 1;
      }
    }
  }

 private:
  std::string buffer_;
};

// What one `data:` payload says: [DONE], an error, choices, usage.
void ReadEvent(const std::string& payload, double now_s, double& last_s, ServeRequestResult& r, bool& done) {
  if (payload == "[DONE]") {
    done = true;
    return;
  }
  json event;
  try {
    event = json::parse(payload);
  } catch (const std::exception&) {
    r.error = "an event that is not JSON: " + payload.substr(0, 80);
    return;
  }
  if (event.contains("error")) {
    r.error = "error event: " + event["error"].dump().substr(0, 200);
    return;
  }
  if (event.contains("choices") && event["choices"].is_array() && !event["choices"].empty()) {
    if (r.ttft_s == 0) {
      r.ttft_s = now_s;
    } else {
      r.itl_s.push_back(now_s - last_s);
    }
    last_s = now_s;
    ++r.output_tokens;
    const json& choice = event["choices"][0];
    if (choice.is_object()) {
      if (choice.contains("text") && choice["text"].is_string()) r.output_text += choice["text"].get<std::string>();
      const json delta = choice.value("delta", json::object());
      if (delta.is_object() && delta.contains("content") && delta["content"].is_string()) {
        r.output_text += delta["content"].get<std::string>();
      }
    }
  }
  if (event.contains("usage") && event["usage"].is_object()) {
    const json& usage = event["usage"];
    if (usage.value("completion_tokens", json()).is_number_integer()) r.output_tokens = usage["completion_tokens"];
    if (usage.value("prompt_tokens", json()).is_number_integer()) r.prompt_tokens = usage["prompt_tokens"];
  }
}

}  // namespace

ServeTarget ParseServeTarget(const std::string& base_url, const std::string& endpoint) {
  static const std::regex url(R"(^(http)://([^/:]+)(:[0-9]{1,5})?(/.*)?$)");
  std::smatch m;
  if (!std::regex_match(base_url, m, url)) {
    throw CliError("bench serve: --base-url must be http://HOST[:PORT][/PREFIX], got '" + base_url + "'" +
                   (base_url.rfind("https:", 0) == 0 ? " (https is not supported by this client)" : ""));
  }
  if (endpoint.empty() || endpoint[0] != '/') throw CliError("bench serve: --endpoint must start with '/'");
  std::string prefix = m[4].str();
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return {m[1].str() + "://" + m[2].str() + m[3].str(), prefix + endpoint};
}

ServeRequestResult SendStreamingRequest(const ServeTarget& target, json body, int64_t prompt_tokens_sent) {
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  ServeRequestResult r;
  r.prompt_tokens = prompt_tokens_sent;
  httplib::Client client(target.scheme_host_port);
  const auto timeout = std::chrono::duration<double>(target.timeout_s);
  client.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  client.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  httplib::Request req;
  req.method = "POST";
  req.path = target.path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  if (!target.api_key.empty()) req.set_header("Authorization", "Bearer " + target.api_key);
  EventReader reader;
  bool done = false;
  std::string error_body;
  int status = 0;
  double last_s = 0;
  const Clock::time_point start = Clock::now();
  req.response_handler = [&](const httplib::Response& response) {
    status = response.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, std::min<size_t>(size, 300 - std::min<size_t>(300, error_body.size())));
      return true;
    }
    const double now_s = SecondsBetween(start, Clock::now());
    reader.Feed(data, size, [&](const std::string& payload) { ReadEvent(payload, now_s, last_s, r, done); });
    return r.error.empty();
  };
  const httplib::Result res = client.send(req);
  r.latency_s = SecondsBetween(start, Clock::now());
  if (!r.error.empty()) return r;
  if (!res) {
    r.error = "connection: " + httplib::to_string(res.error());
  } else if (status != 200) {
    r.error = "HTTP " + std::to_string(status) + ": " + error_body;
  } else if (!done) {
    r.error = "the stream ended without [DONE]";
  } else if (r.ttft_s == 0) {
    r.error = "the stream held no choices";
  } else {
    r.success = true;
  }
  return r;
}

}  // namespace vllm::bench
