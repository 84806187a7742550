// Reach counters: named counters that prove a code path ran.
//
// Kernels count their variants ("MatMulCpu.q8_0.avx512"), layers count their seams
// ("dense_attn::AttnBlock"). Tests reset, run, and assert on the counts; removing
// the call site of a seam makes such a test fail.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace vt::reach {

void Hit(std::string_view name, uint64_t times = 1);
uint64_t Count(std::string_view name);
void Reset();
std::map<std::string, uint64_t, std::less<>> Snapshot();

}  // namespace vt::reach
