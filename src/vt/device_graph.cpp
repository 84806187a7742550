#include "vt/device_graph.h"

#include <string>

#include "vt/error.h"

namespace vt {
namespace {

[[noreturn]] void ThrowNoGraphs(DeviceType type) {
  throw Error(std::string("vt: device graphs are not supported on ") + DeviceTypeName(type) +
              " (CUDA and ROCm devices have them)");
}

}  // namespace

std::shared_ptr<GraphMemory> DeviceBackend::NewGraphMemory(int) { ThrowNoGraphs(type()); }
void DeviceBackend::BeginGraphCapture(const std::shared_ptr<GraphMemory>&, int) { ThrowNoGraphs(type()); }
std::unique_ptr<CapturedGraph> DeviceBackend::EndGraphCapture(int) { ThrowNoGraphs(type()); }

void DeviceBackend::SetProfilerCapture(bool, int) {
  throw Error(std::string("vt: device ") + DeviceTypeName(type()) +
              " has no profiler capture (a GPU profiler's start / stop; CUDA and ROCm have one)");
}

void SetProfilerCapture(Device device, bool on) { GetDeviceBackend(device.type).SetProfilerCapture(on, device.index); }

bool GraphsSupported(Device device) {
  return IsDeviceAvailable(device) && GetDeviceBackend(device.type).SupportsGraphs();
}

std::shared_ptr<GraphMemory> NewGraphMemory(Device device) {
  return GetDeviceBackend(device.type).NewGraphMemory(device.index);
}

std::unique_ptr<CapturedGraph> CaptureGraph(Device device, const std::shared_ptr<GraphMemory>& memory,
                                            const std::function<void()>& record) {
  DeviceBackend& backend = GetDeviceBackend(device.type);
  if (!memory) throw Error("vt::CaptureGraph on " + device.ToString() + ": no GraphMemory given");
  backend.BeginGraphCapture(memory, device.index);
  try {
    record();
  } catch (const std::exception& e) {
    try {
      backend.EndGraphCapture(device.index);  // ends the recording; its error is the one below's consequence
    } catch (const std::exception&) {
    }
    throw Error("vt::CaptureGraph on " + device.ToString() + ": the recorded code failed: " + e.what());
  }
  return backend.EndGraphCapture(device.index);
}

}  // namespace vt
