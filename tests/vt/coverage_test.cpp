// Every op in ops.def has a kernel or an explicit, reasoned "not provided" entry
// on every backend this build produced. Prints the matrix.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>

#include "vt/registry.h"

namespace vt {
namespace {

std::vector<DeviceType> BuiltBackends() {
  std::vector<DeviceType> built;
  std::stringstream list(VT_BUILT_BACKEND_LIST);  // "cpu;cuda;rocm", from CMake
  for (std::string name; std::getline(list, name, ';');) {
    for (DeviceType t : kAllDeviceTypes) {
      if (name == DeviceTypeName(t)) built.push_back(t);
    }
  }
  return built;
}

TEST(CoverageTest, EveryOpOnEveryBuiltBackend) {
  std::vector<std::string> load = LoadBackends();
  for (const std::string& line : load) std::printf("backend %s\n", line.c_str());
  const Registry& registry = Registry::Get();
  std::printf("%-20s", "op");
  for (DeviceType d : BuiltBackends()) std::printf(" %-6s", DeviceTypeName(d));
  std::printf("\n");
  for (OpId op : AllOps()) {
    std::printf("%-20s", OpName(op));
    for (DeviceType d : BuiltBackends()) {
      const KernelEntry& e = registry.Entry(op, d);
      std::printf(" %-6s", e.fn ? "K" : e.not_provided ? "-" : "MISSING");
      EXPECT_TRUE(e.fn != nullptr || e.not_provided != nullptr)
          << "op " << OpName(op) << " has no kernel on " << DeviceTypeName(d)
          << " and is not listed in that backend's not-provided table";
    }
    std::printf("\n");
  }
  for (DeviceType d : BuiltBackends()) {
    EXPECT_TRUE(IsBackendLoaded(d)) << "backend " << DeviceTypeName(d) << " was built but did not load: "
                                    << BackendLoadError(d);
  }
}

}  // namespace
}  // namespace vt
