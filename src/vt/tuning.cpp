#include "vt/tuning.h"

#include <atomic>
#include <map>
#include <mutex>

namespace vt::tuning {
namespace {

struct Overrides {
  std::atomic<bool> any_set{false};
  std::mutex mutex;
  std::map<std::string, std::string, std::less<>> variants;
};

Overrides& Get() {
  static Overrides* overrides = new Overrides();
  return *overrides;
}

}  // namespace

void SetVariant(std::string_view family, std::string_view variant) {
  Overrides& o = Get();
  std::lock_guard<std::mutex> lock(o.mutex);
  if (variant.empty()) {
    auto it = o.variants.find(family);
    if (it != o.variants.end()) o.variants.erase(it);
  } else {
    o.variants[std::string(family)] = std::string(variant);
  }
  o.any_set.store(!o.variants.empty(), std::memory_order_release);
}

std::string Variant(std::string_view family) {
  Overrides& o = Get();
  if (!o.any_set.load(std::memory_order_acquire)) return {};
  std::lock_guard<std::mutex> lock(o.mutex);
  auto it = o.variants.find(family);
  return it == o.variants.end() ? std::string() : it->second;
}

}  // namespace vt::tuning
