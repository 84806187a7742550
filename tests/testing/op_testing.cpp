#include "op_testing.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "vt/cpu/cpu_features.h"

namespace vt::testing {

std::vector<Device> TestDevices() {
  std::vector<Device> devices = {kCpu};
  LoadBackends();
  for (DeviceType type : {DeviceType::kCUDA, DeviceType::kROCM}) {
    if (IsDeviceAvailable({type, 0})) devices.push_back({type, 0});
  }
  return devices;
}

std::vector<Device> GpuTestDevices() {
  std::vector<Device> gpus = TestDevices();
  std::erase_if(gpus, [](Device d) { return d.type == DeviceType::kCPU; });
  return gpus;
}

namespace {

// `body` at `isa_name` twice, with an optional extension off then on (`allow` switches
// it); SCOPED_TRACE names both. Leaves the extension allowed.
void WithExtensionOffThenOn(const std::string& isa_name, const char* extension, void (*allow)(bool),
                            const std::function<void()>& body) {
  for (const bool on : {false, true}) {
    SCOPED_TRACE("cpu isa " + isa_name + (on ? std::string(" + ") + extension : std::string()));
    allow(on);
    body();
  }
  allow(true);
}

}  // namespace

void ForEachCpuIsa(const std::function<void()>& body) {
  const cpu::Isa detected = cpu::DetectedIsa();
  cpu::SetAvxVnniAllowed(true);
  const bool avx_vnni = cpu::HasAvxVnni();
  cpu::SetNeonDotprodAllowed(true);
  const bool neon_dotprod = cpu::HasNeonDotprod();
  cpu::SetAmxAllowed(true);
  const bool amx = cpu::HasAmxBf16();
  for (int level = 0; level <= static_cast<int>(detected); ++level) {
    auto isa = static_cast<cpu::Isa>(level);
    cpu::SetIsaLimit(isa);
    // aarch64 with sdot: the portable kernels, then the Q8_0 / Q4_0 MatMul on sdot;
    // AVX2 with AVX-VNNI: the maddubs tiles, then the VNNI ones; AVX-512 with AMX:
    // without the tiles, then with them.
    if (isa == cpu::Isa::kPortable && neon_dotprod) {
      WithExtensionOffThenOn("portable", "neon dotprod", cpu::SetNeonDotprodAllowed, body);
    } else if (isa == cpu::Isa::kAvx2 && avx_vnni) {
      WithExtensionOffThenOn("avx2", "avx-vnni", cpu::SetAvxVnniAllowed, body);
    } else if (isa == cpu::Isa::kAvx512 && amx) {
      WithExtensionOffThenOn("avx512", "amx", cpu::SetAmxAllowed, body);
    } else {
      SCOPED_TRACE(std::string("cpu isa ") + cpu::IsaName(isa));
      body();
    }
  }
  cpu::SetIsaLimit(cpu::Isa::kAvx512);
}

void ForEachDeviceAndIsa(const std::function<void(Device)>& body) {
  for (Device device : TestDevices()) {
    SCOPED_TRACE("device " + device.ToString());
    if (device.type == DeviceType::kCPU) {
      ForEachCpuIsa([&] { body(device); });
    } else {
      body(device);
    }
  }
}

Tensor RandomTensor(const Shape& shape, DType dtype, Device device, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(static_cast<size_t>(NumElements(shape)));
  for (float& v : values) v = dist(rng);
  Tensor f32 = Tensor::FromVector(values, shape);
  Tensor out = Tensor::Empty(shape, dtype, device);
  out.CopyFrom(f32);
  return out;
}

Tensor WithPaddedRows(const Tensor& t, int64_t pad) {
  Shape padded = t.shape();
  padded.back() += pad;
  Tensor buffer = Tensor::Empty(padded, t.dtype(), t.device());
  Poison(buffer);
  Tensor view = buffer.Slice(-1, 0, t.size(-1));
  view.CopyFrom(t);
  return view;
}

Tensor WithTransposedStorage(const Tensor& t, int dim0, int dim1) {
  Shape swapped = t.shape();
  std::swap(swapped[dim0], swapped[dim1]);
  Tensor buffer = Tensor::Empty(swapped, t.dtype(), t.device());
  Tensor view = buffer.Transpose(dim0, dim1);
  view.CopyFrom(t);
  return view;
}

std::vector<double> MatMulReference(const Tensor& x, const Tensor& w) {
  const std::vector<double> xs = ToDoubles(x), ws = ToDoubles(w);
  const int64_t m = x.size(0), n = w.size(0), k = x.size(1);
  std::vector<double> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t e = 0; e < k; ++e) sum += xs[i * k + e] * ws[j * k + e];
      out[i * n + j] = sum;
    }
  }
  return out;
}

std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<float> f = t.ToFloatVector();
  return std::vector<double>(f.begin(), f.end());
}

std::vector<int64_t> ToInts(const Tensor& t) { return t.ToIntVector(); }

double DefaultTolerance(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return 1e-2;
    case DType::kF16: return 2e-3;
    default: return 1e-5;
  }
}

::testing::AssertionResult AllClose(const std::vector<double>& ref, const std::vector<double>& got, double tol) {
  if (ref.size() != got.size()) {
    return ::testing::AssertionFailure() << "size mismatch: reference " << ref.size() << ", got " << got.size();
  }
  double scale = 1.0;
  for (double r : ref) scale = std::fmax(scale, std::fabs(r));
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double err = std::fabs(got[i] - ref[i]);
    if (std::isnan(got[i]) || std::isnan(ref[i])) err = std::numeric_limits<double>::infinity();
    if (err > worst) {
      worst = err;
      worst_i = i;
    }
  }
  if (worst <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max error " << worst << " > " << tol << " * " << scale << " at element "
                                       << worst_i << ": reference " << ref[worst_i] << ", got " << got[worst_i];
}

::testing::AssertionResult AllClose(const std::vector<double>& ref, const Tensor& got, double tol) {
  return AllClose(ref, ToDoubles(got), tol);
}

void Poison(const Tensor& t) {
  if (IsQuantized(t.dtype()) || t.numel() == 0) return;
  Fill({.dst = t, .value = IsInteger(t.dtype()) ? -1.0 : std::numeric_limits<double>::quiet_NaN()});
}

}  // namespace vt::testing
