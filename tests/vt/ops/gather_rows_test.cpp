// GatherRows contract: out[t] = table[ids[t]] for every float and block table dtype,
// i32/i64 ids (repeats, strided), strided table and out rows, every out dtype; an
// out-of-range id throws naming the id, its position and the table size.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "testing/op_testing.h"
#include "vt/quant.h"

namespace vt {
namespace {

constexpr DType kTableDTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ8_0,
                                  DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_K};

// table [V, H] of `dtype` with rows strided by one extra block.
Tensor RandomTable(int64_t v, int64_t h, DType dtype, std::mt19937& rng) {
  const int64_t pad = Info(dtype).block_elems;
  if (!IsQuantized(dtype)) return testing::WithPaddedRows(testing::RandomTensor({v, h}, dtype, kCpu, rng), pad);
  Tensor values = testing::RandomTensor({v, h}, DType::kF32, kCpu, rng);
  Tensor table = Tensor::Empty({v, h + pad}, dtype).Slice(1, 0, h);
  for (int64_t r = 0; r < v; ++r) {
    QuantizeRow(values.data_ptr<float>() + r * h, h, static_cast<char*>(table.data()) + r * BytesFor(dtype, h + pad),
                dtype);
  }
  return table;
}

// ids as a strided view (every other element of a buffer twice as long).
Tensor StridedIds(const std::vector<int64_t>& ids, DType dtype) {
  const auto n = static_cast<int64_t>(ids.size());
  std::vector<int64_t> spread(static_cast<size_t>(2 * n), -7);
  for (int64_t i = 0; i < n; ++i) spread[2 * i] = ids[i];
  Tensor buffer = Tensor::Empty({2 * n}, dtype);
  buffer.CopyFrom(Tensor::FromVector(spread, {2 * n}));
  return buffer.AsStrided({n}, {2}, 0);
}

Tensor OnDevice(const Tensor& t, Device device) { return device == t.device() ? t : t.To(device); }

TEST(GatherRowsTest, EveryTableDtypeAndIdDtype) {
  std::mt19937 rng(1);
  const std::vector<int64_t> ids = {3, 0, 6, 3, 6, 1, 2};  // repeats, first and last row
  for (DType table_dtype : kTableDTypes) {
    const int64_t v = 7, h = 2 * Info(table_dtype).block_elems;
    const Tensor table = RandomTable(v, h, table_dtype, rng);
    const std::vector<double> rows = testing::ToDoubles(table);
    std::vector<double> ref;
    for (int64_t id : ids) ref.insert(ref.end(), rows.begin() + id * h, rows.begin() + (id + 1) * h);
    for (DType id_dtype : {DType::kI32, DType::kI64}) {
      for (DType out_dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
        SCOPED_TRACE(std::string("table ") + DTypeName(table_dtype) + " ids " + DTypeName(id_dtype) + " out " +
                     DTypeName(out_dtype));
        testing::ForEachDeviceAndIsa([&](Device device) {
          const Tensor out = testing::WithPaddedRows(Tensor::Zeros({7, h}, out_dtype, device), 3);
          testing::Poison(out);
          GatherRows({.table = OnDevice(table, device), .ids = StridedIds(ids, id_dtype).To(device), .out = out});
          // A copy, at most one rounding to out's dtype (exact when the dtypes match).
          EXPECT_TRUE(
              testing::AllClose(ref, out, out_dtype == table_dtype ? 0.0 : testing::DefaultTolerance(out_dtype)));
        });
      }
    }
  }
}

TEST(GatherRowsTest, OutOfRangeIdNamesIdPositionAndTableSize) {
  std::mt19937 rng(2);
  const Tensor table = RandomTable(5, 32, DType::kQ8_0, rng);
  for (int64_t bad : {5, -1}) {
    testing::ForEachDeviceAndIsa([&](Device device) {
      const Tensor ids = Tensor::FromVector(std::vector<int32_t>{0, 4, static_cast<int32_t>(bad)}, {3}).To(device);
      const Tensor out = Tensor::Zeros({3, 32}, DType::kF32, device);
      try {
        // The CPU throws from the call; a GPU kernel records the id and the device
        // throws at its next wait for the queue (src/vt/gpu/gpu_runtime.h).
        GatherRows({.table = OnDevice(table, device), .ids = ids, .out = out});
        Synchronize(device);
        ADD_FAILURE() << "id " << bad << " was accepted";
      } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("GatherRows"), std::string::npos) << what;
        EXPECT_NE(what.find("ids[2] = " + std::to_string(bad)), std::string::npos) << what;
        EXPECT_NE(what.find("5 rows"), std::string::npos) << what;
      }
      // The error was reported once: the device's later work is not blamed for it.
      EXPECT_NO_THROW(Synchronize(device));
      EXPECT_NO_THROW(GatherRows({.table = OnDevice(table, device), .ids = ids.Slice(0, 0, 2), .out = out.Slice(0, 0, 2)}));
      EXPECT_NO_THROW(Synchronize(device));
    });
  }
}

TEST(GatherRowsTest, NoIds) {
  std::mt19937 rng(3);
  const Tensor table = RandomTable(4, 64, DType::kF32, rng);
  testing::ForEachDeviceAndIsa([&](Device device) {
    EXPECT_NO_THROW(GatherRows({.table = OnDevice(table, device),
                                .ids = Tensor::Zeros({0}, DType::kI32, device),
                                .out = Tensor::Zeros({0, 64}, DType::kF32, device)}));
  });
}

}  // namespace
}  // namespace vt
