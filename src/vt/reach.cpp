#include "vt/reach.h"

#include <mutex>

namespace vt::reach {
namespace {

struct Counters {
  std::mutex mutex;
  std::map<std::string, uint64_t, std::less<>> counts;
};

Counters& Get() {
  static Counters* counters = new Counters();
  return *counters;
}

}  // namespace

void Hit(std::string_view name, uint64_t times) {
  Counters& c = Get();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.counts.find(name);
  if (it == c.counts.end()) it = c.counts.emplace(std::string(name), 0).first;
  it->second += times;
}

uint64_t Count(std::string_view name) {
  Counters& c = Get();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.counts.find(name);
  return it == c.counts.end() ? 0 : it->second;
}

void Reset() {
  Counters& c = Get();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.counts.clear();
}

std::map<std::string, uint64_t, std::less<>> Snapshot() {
  Counters& c = Get();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.counts;
}

}  // namespace vt::reach
