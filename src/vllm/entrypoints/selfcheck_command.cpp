// `vllm-cpp selfcheck`: what this build can run, and a small proof that it runs.
#include <cmath>
#include <cstdio>
#include <string>

#include "vllm/entrypoints/cli_args.h"
#include "vllm/entrypoints/commands.h"
#include "vt/ops.h"
#include "vt/registry.h"

namespace vllm {
namespace {

void PrintCoverage() {
  std::printf("\nop coverage (K = kernel, - = not provided, ! = missing):\n%-20s", "op");
  for (vt::DeviceType d : vt::kAllDeviceTypes) std::printf(" %-6s", vt::DeviceTypeName(d));
  std::printf("\n");
  const vt::Registry& registry = vt::Registry::Get();
  for (vt::OpId op : vt::AllOps()) {
    std::printf("%-20s", vt::OpName(op));
    for (vt::DeviceType d : vt::kAllDeviceTypes) {
      const vt::KernelEntry& e = registry.Entry(op, d);
      const char* mark = !vt::IsBackendBuilt(d) ? "n/a" : e.fn ? "K" : e.not_provided ? "-" : "!";
      std::printf(" %-6s", mark);
    }
    std::printf("\n");
  }
}

// RMSNorm of one row on `device`, compared with a scalar computation on the host.
bool CheckDevice(vt::Device device) {
  const int64_t n = 64;
  std::vector<float> x(n), w(n, 0.5f);
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  vt::Tensor xt = vt::Tensor::FromVector(x, {1, n}).To(device);
  vt::Tensor wt = vt::Tensor::FromVector(w, {n}).To(device);
  vt::Tensor out = vt::Tensor::Empty({1, n}, vt::DType::kF32, device);
  vt::RmsNorm({.x = xt, .weight = wt, .out = out, .eps = 1e-6f, .weight_offset = 0.0f});
  std::vector<float> got = out.ToFloatVector();
  double ms = 0;
  for (float v : x) ms += static_cast<double>(v) * v;
  double inv = 1.0 / std::sqrt(ms / n + 1e-6);
  double max_err = 0;
  for (int64_t i = 0; i < n; ++i) max_err = std::fmax(max_err, std::fabs(got[i] - x[i] * inv * 0.5));
  std::printf("  %-8s RmsNorm max error %.2e: %s\n", device.ToString().c_str(), max_err,
              max_err < 1e-5 ? "ok" : "FAILED");
  return max_err < 1e-5;
}

}  // namespace

int RunSelfCheckCommand(const CommandArgs& args) {
  CliArgs cli("selfcheck");
  cli.AddFlag("help", "show this help");
  if (!cli.ParseOrShowHelp(args)) return 0;
  std::printf("backends:\n  cpu: built in (%d threads)\n", vt::GetNumThreads());
  for (const std::string& line : vt::LoadBackends()) std::printf("  %s\n", line.c_str());
  PrintCoverage();
  std::printf("\ndevices:\n");
  bool ok = true;
  for (vt::DeviceType type : vt::kAllDeviceTypes) {
    if (!vt::IsBackendLoaded(type)) continue;
    vt::DeviceBackend& backend = vt::GetDeviceBackend(type);
    for (int i = 0; i < backend.DeviceCount(); ++i) {
      std::printf("  %s:%d %s\n", vt::DeviceTypeName(type), i, backend.DeviceName(i).c_str());
      if (vt::Registry::Get().Has(vt::OpId::kRmsNorm, type)) ok = CheckDevice({type, i}) && ok;
    }
  }
  return ok ? 0 : 1;
}

}  // namespace vllm
