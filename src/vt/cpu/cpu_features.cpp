#include "cpu_features.h"

#include <atomic>

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace vt::cpu {
namespace {

std::atomic<int> g_limit{static_cast<int>(Isa::kAvx512)};
std::atomic<bool> g_avx_vnni_allowed{true};
std::atomic<bool> g_neon_dotprod_allowed{true};
std::atomic<bool> g_amx_allowed{true};

#if defined(__x86_64__)
// CPUID leaf 7 subleaf 1, EAX: bit 4 AVX-VNNI, bit 5 AVX512_BF16 (GCC 12's
// __builtin_cpu_supports knows neither).
unsigned CpuidLeaf7Sub1Eax() {
  static const unsigned eax = [] {
    unsigned a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
    return a;
  }();
  return eax;
}

// CPUID leaf 7 subleaf 0, EDX: bit 22 AMX-BF16, bit 24 AMX-TILE.
bool CpuReportsAmxBf16() {
  unsigned a, b, c, d;
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  return ((d >> 22) & 1u) && ((d >> 24) & 1u);
}

// Linux hands out the 8 KiB tile data state only on request (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, kernel 5.16+); the grant covers every
// thread of the process.
bool OsGrantsTileData() {
#if defined(__linux__)
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
#endif

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return "portable";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

Isa DetectedIsa() {
#if defined(__x86_64__)
  static const Isa detected = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
      return Isa::kAvx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
    return Isa::kPortable;
  }();
  return detected;
#else
  return Isa::kPortable;
#endif
}

Isa ActiveIsa() {
  int detected = static_cast<int>(DetectedIsa());
  int limit = g_limit.load(std::memory_order_relaxed);
  return static_cast<Isa>(detected < limit ? detected : limit);
}

void SetIsaLimit(Isa limit) { g_limit.store(static_cast<int>(limit), std::memory_order_relaxed); }

bool HasAvx512Vnni() {
#if defined(__x86_64__)
  return DetectedIsa() == Isa::kAvx512 && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

bool HasAvx512Bf16() {
#if defined(__x86_64__)
  return DetectedIsa() == Isa::kAvx512 && ((CpuidLeaf7Sub1Eax() >> 5) & 1u);
#else
  return false;
#endif
}

bool HasAvxVnni() {
#if defined(__x86_64__)
  return DetectedIsa() >= Isa::kAvx2 && ((CpuidLeaf7Sub1Eax() >> 4) & 1u) &&
         g_avx_vnni_allowed.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void SetAvxVnniAllowed(bool allowed) { g_avx_vnni_allowed.store(allowed, std::memory_order_relaxed); }

bool HasNeonDotprod() {
#if defined(__aarch64__) && defined(__linux__)
  static const bool reported = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  return reported && g_neon_dotprod_allowed.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void SetNeonDotprodAllowed(bool allowed) { g_neon_dotprod_allowed.store(allowed, std::memory_order_relaxed); }

bool HasAmxBf16() {
#if defined(__x86_64__)
  static const bool usable = HasAvx512Bf16() && CpuReportsAmxBf16() && OsGrantsTileData();
  return usable && g_amx_allowed.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void SetAmxAllowed(bool allowed) { g_amx_allowed.store(allowed, std::memory_order_relaxed); }

}  // namespace vt::cpu
