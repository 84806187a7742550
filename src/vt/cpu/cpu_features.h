// Which vector instruction sets CPU kernels may use, chosen at run time.
//
// Kernels pick the widest path not above ActiveIsa(). ActiveIsa() is what the CPU
// reports, capped by SetIsaLimit (tests lower it to exercise every path, the
// portable one included, on any machine).
#pragma once

namespace vt::cpu {

enum class Isa : int {
  kPortable = 0,  // plain C++ (what a non-x86 or pre-AVX2 CPU runs)
  kAvx2 = 1,      // AVX2 + FMA + F16C
  kAvx512 = 2,    // AVX-512 F/BW/VL/DQ (+ VNNI, BF16 when reported)
};

const char* IsaName(Isa isa);
Isa DetectedIsa();  // what this CPU supports
Isa ActiveIsa();    // min(DetectedIsa(), limit)
void SetIsaLimit(Isa limit);

bool HasAvx512Vnni();
bool HasAvx512Bf16();

// AVX-VNNI: the VEX-encoded vpdpbusd / vpdpwssd on 256-bit vectors (Intel client
// parts from Alder Lake, Sapphire Rapids, Zen 5), which the AVX2 variant of the
// block-weight MatMul uses where the CPU reports it, the ISA allows AVX2 and tests
// have not turned it off (SetAvxVnniAllowed: they run the maddubs path too).
bool HasAvxVnni();
void SetAvxVnniAllowed(bool allowed);

// aarch64 with the dot-product extension (sdot: 4 int8 products into each int32
// lane; Armv8.2 optional, Armv8.4 mandatory), which the Q8_0 / Q4_0 MatMul uses on
// top of the portable kernels where the CPU reports it and tests have not turned
// it off (SetNeonDotprodAllowed: they run the portable MatMul too). x86: false.
bool HasNeonDotprod();
void SetNeonDotprodAllowed(bool allowed);

// AMX with bf16 tiles (Intel Xeon from Sapphire Rapids): the CPU reports AMX-TILE and
// AMX-BF16 and Linux granted this process the tile data state (arch_prctl
// ARCH_REQ_XCOMP_PERM, asked once; without it a tile instruction faults), AVX-512 with
// BF16 is there for the code around the tiles, and tests have not turned it off
// (SetAmxAllowed: they run the AVX-512 kernels without it too). The block-weight
// MatMul's GEMM path uses it at ActiveIsa() == kAvx512.
bool HasAmxBf16();
void SetAmxAllowed(bool allowed);

}  // namespace vt::cpu
