// GGUF reader and writer: every value type round-trips, tensors are zero-copy views
// with reversed shapes, and malformed files fail with errors naming the file, the
// key or tensor, and expected versus found.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "loader_test_util.h"
#include "vllm/model_loader/gguf_reader.h"
#include "vllm/model_loader/gguf_writer.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm {
namespace {

using testing::Bytes;
using testing::ThrowsWith;

GgufFile ParseBytes(const std::vector<uint8_t>& bytes) {
  return GgufFile::Parse(MappedFile::FromBytes(bytes, "bad.gguf"));
}

// A valid file: one string key, one f32 tensor "t" of ne {4, 2} at offset 0.
Bytes Header(uint64_t tensors = 1, uint64_t kvs = 1) {
  Bytes b;
  b.Raw("GGUF").U32(3).U64(tensors).U64(kvs);
  return b;
}
Bytes& ArchKey(Bytes& b) { return b.Str("general.architecture").U32(8).Str("qwen35"); }
Bytes& TensorInfo(Bytes& b, const std::string& name, uint32_t type, std::vector<uint64_t> ne, uint64_t offset) {
  b.Str(name).U32(static_cast<uint32_t>(ne.size()));
  for (uint64_t d : ne) b.U64(d);
  return b.U32(type).U64(offset);
}
std::vector<uint8_t> ValidFile() {
  Bytes b = Header();
  ArchKey(b);
  TensorInfo(b, "t", 0, {4, 2}, 0);
  b.PadTo(32);
  for (int i = 0; i < 8; ++i) b.Put<float>(static_cast<float>(i));
  return b.data;
}

TEST(GgufTest, WriterAndReaderRoundTripEveryValueType) {
  testing::TempDir dir;
  GgufWriter writer(64);
  GgufMetadata& m = writer.metadata();
  m.Set("u8", GgufValue::Int(GgufType::kUint8, 255));
  m.Set("i8", GgufValue::Int(GgufType::kInt8, -128));
  m.Set("u16", GgufValue::Int(GgufType::kUint16, 65535));
  m.Set("i16", GgufValue::Int(GgufType::kInt16, -32768));
  m.Set("u32", GgufValue::U32(4000000000u));
  m.Set("i32", GgufValue::I32(-7));
  m.Set("u64", GgufValue::Uint64(18446744073709551615ull));
  m.Set("i64", GgufValue::Int(GgufType::kInt64, -(int64_t{1} << 62)));
  m.Set("f32", GgufValue::F32(0.1f));
  m.Set("f64", GgufValue::Float(GgufType::kFloat64, 0.1));
  m.Set("bool", GgufValue::Bool(true));
  m.Set("string", GgufValue::String("qwen35"));
  m.Set("ints", GgufValue::IntArray(GgufType::kInt32, {11, 11, 10, 0}));
  m.Set("bools", GgufValue::IntArray(GgufType::kBool, {1, 0, 1}));
  m.Set("u64s", GgufValue::IntArray(GgufType::kUint64, {-1, 3}));
  m.Set("floats", GgufValue::FloatArray(GgufType::kFloat32, {0.5, -2}));
  m.Set("strings", GgufValue::StringArray({"a b", "", "c"}));
  m.Set("nested", GgufValue::ArrayOfArrays({GgufValue::IntArray(GgufType::kUint8, {1, 2}), GgufValue::StringArray({"x"})}));
  vt::Tensor f32 = vt::Tensor::FromVector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  vt::Tensor f16 = vt::Tensor::Empty({3, 2}, vt::DType::kF16);
  f16.CopyFrom(vt::Tensor::FromVector(std::vector<float>{1, -1, 0.5, 2, 3, 4}, {3, 2}));
  writer.AddTensor("a.weight", f32);
  writer.AddTensor("b.weight", f16);
  writer.Write(dir.File("m.gguf"));

  const GgufFile file = GgufFile::Open(dir.File("m.gguf"));
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 64u);
  EXPECT_EQ(file.data_offset() % 64, 0u);
  for (const auto& [key, value] : m.entries()) {
    ASSERT_NE(file.metadata().Find(key), nullptr) << key;
    EXPECT_EQ(*file.metadata().Find(key), value) << key << ": " << file.metadata().Find(key)->ToString();
  }
  EXPECT_EQ(file.metadata().Get("u64").AsUint64(), 18446744073709551615ull);
  EXPECT_TRUE(ThrowsWith([&] { file.metadata().GetInt("u64"); }, {"m.gguf", "'u64'", "beyond"}));
  EXPECT_TRUE(ThrowsWith([&] { file.metadata().GetInt("string"); }, {"'string'", "is a string", "expected an integer"}));
  const GgufTensorInfo* a = file.FindTensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ne, (std::vector<int64_t>{3, 2}));  // ne reversed: ne[0] contiguous
  EXPECT_EQ(file.Tensor(*a).shape(), (vt::Shape{2, 3}));
  EXPECT_EQ(file.Tensor(*a).ToFloatVector(), f32.ToFloatVector());
  EXPECT_EQ(file.Tensor("b.weight").ToFloatVector(), f16.ToFloatVector());
  EXPECT_EQ(file.FindTensor("b.weight")->offset % 64, 0u);
}

// The CPU engine's huge-page copy (FileResidency::kHugePageCopy) holds the file's
// bytes exactly, 2 MiB-aligned, and parses to the same tensors as the mapping.
TEST(GgufTest, HugePageCopyHoldsTheFileBytes) {
  testing::TempDir dir;
  const std::vector<uint8_t> bytes = ValidFile();
  std::ofstream(dir.File("copy.gguf"), std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                                  static_cast<std::streamsize>(bytes.size()));
  const auto copy = MappedFile::Open(dir.File("copy.gguf"), FileResidency::kHugePageCopy);
  ASSERT_EQ(copy->size(), bytes.size());
  EXPECT_EQ(std::memcmp(copy->data(), bytes.data(), bytes.size()), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copy->data()) % (uintptr_t{2} << 20), 0u);
  const GgufFile mapped = GgufFile::Open(dir.File("copy.gguf"));
  const GgufFile copied = GgufFile::Open(dir.File("copy.gguf"), FileResidency::kHugePageCopy);
  EXPECT_EQ(copied.Tensor("t").ToFloatVector(), mapped.Tensor("t").ToFloatVector());
}

TEST(GgufTest, TensorsAreViewsIntoTheMappedFile) {
  const std::vector<uint8_t> bytes = ValidFile();
  auto mapped = MappedFile::FromBytes(bytes, "view.gguf");
  const GgufFile file = GgufFile::Parse(mapped);
  vt::Tensor t = file.Tensor("t");
  EXPECT_EQ(static_cast<const uint8_t*>(t.data()), mapped->data() + file.data_offset());
  EXPECT_EQ(t.ToFloatVector(), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(GgufTest, ReadsVersion2) {
  std::vector<uint8_t> bytes = ValidFile();
  bytes[4] = 2;
  EXPECT_EQ(ParseBytes(bytes).version(), 2u);
}

TEST(GgufTest, EveryTruncationIsAnErrorNotACrash) {
  const std::vector<uint8_t> bytes = ValidFile();
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + n);
    EXPECT_TRUE(ThrowsWith([&] { ParseBytes(prefix); }, {"bad.gguf"})) << "prefix of " << n << " bytes";
  }
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(std::vector<uint8_t>(bytes.begin(), bytes.end() - 1)); },
                         {"tensor 't'", "outside", "data section"}));
}

TEST(GgufTest, WrongMagicOrVersion) {
  std::vector<uint8_t> bytes = ValidFile();
  bytes[0] = 'X';
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(bytes); }, {"bad.gguf", "not a GGUF file", "\"GGUF\"", "58 47 55 46"}));
  for (uint32_t version : {1u, 4u}) {
    bytes = ValidFile();
    std::memcpy(bytes.data() + 4, &version, 4);
    EXPECT_TRUE(ThrowsWith([&] { ParseBytes(bytes); }, {"unsupported GGUF version " + std::to_string(version), "expected 2 or 3"}));
  }
  bytes = ValidFile();
  const uint32_t big_endian_3 = 0x03000000;
  std::memcpy(bytes.data() + 4, &big_endian_3, 4);
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(bytes); }, {"big-endian"}));
}

TEST(GgufTest, AbsurdCountsAndLengths) {
  Bytes tensors = Header(uint64_t{1} << 60, 0);
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(tensors.data); }, {"bad.gguf", "tensor count", "1152921504606846976", "impossible"}));
  Bytes kvs = Header(0, uint64_t{1} << 60);
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(kvs.data); }, {"key/value count", "impossible"}));
  Bytes key = Header(0, 1);
  key.U64(uint64_t{1} << 40).Raw("general");
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(key.data); }, {"the key of metadata entry 0", "1099511627776 bytes", "remain"}));
  Bytes value = Header(0, 1);
  value.Str("k").U32(8).U64(1000).Raw("short");
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(value.data); }, {"metadata key 'k'", "1000 bytes"}));
  Bytes array = Header(0, 1);
  array.Str("tokens").U32(9).U32(8).U64(uint64_t{1} << 61);
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(array.data); }, {"element count", "'tokens'", "impossible"}));
}

TEST(GgufTest, BadValueTypesAndNesting) {
  Bytes type = Header(0, 1);
  type.Str("k").U32(13).U32(0);
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(type.data); }, {"type of metadata key 'k'", "13", "not a GGUF value type"}));
  Bytes boolean = Header(0, 1);
  boolean.Str("flag").U32(7).Put<uint8_t>(2);
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(boolean.data); }, {"'flag'", "bool stored as 2"}));
  Bytes deep = Header(0, 1);
  deep.Str("deep").U32(9);
  for (int i = 0; i < 9; ++i) deep.U32(9).U64(1);
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(deep.data); }, {"'deep'", "nests arrays deeper than 8"}));
  Bytes align = Header(0, 1);
  align.Str("general.alignment").U32(4).U32(48);
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(align.data); }, {"general.alignment", "48", "power of two"}));
}

TEST(GgufTest, DuplicateKeysAndTensors) {
  Bytes keys = Header(0, 2);
  ArchKey(keys);
  ArchKey(keys);
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(keys.data); }, {"bad.gguf", "'general.architecture' appears twice"}));
  Bytes tensors = Header(2, 0);
  TensorInfo(tensors, "t", 0, {4}, 0);
  TensorInfo(tensors, "t", 0, {4}, 32);
  tensors.PadTo(32).Zeros(64);
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(tensors.data); }, {"tensor 't' appears twice"}));
}

TEST(GgufTest, BadTensorInfos) {
  auto parse_one = [](const std::string& name, uint32_t type, std::vector<uint64_t> ne, uint64_t offset) {
    Bytes b = Header(1, 0);
    TensorInfo(b, name, type, std::move(ne), offset);
    b.PadTo(32).Zeros(64);
    ParseBytes(b.data);
  };
  EXPECT_TRUE(ThrowsWith([&] { parse_one("w", 99, {4}, 0); }, {"tensor 'w'", "tensor type 99", "not a ggml type"}));
  EXPECT_TRUE(ThrowsWith([&] { parse_one("w", 0, {1, 1, 1, 1, 1}, 0); }, {"tensor 'w'", "5 dims", "1 to 4"}));
  EXPECT_TRUE(ThrowsWith([&] { parse_one("w", 0, {uint64_t{1} << 40, uint64_t{1} << 40}, 0); }, {"tensor 'w'", "absurd"}));
  EXPECT_TRUE(ThrowsWith([&] { parse_one("w", 8, {48}, 0); }, {"tensor 'w'", "Q8_0", "ne[0] = 48", "32-value blocks"}));
  EXPECT_TRUE(ThrowsWith([&] { parse_one("w", 0, {4}, 8); }, {"tensor 'w'", "offset 8", "alignment 32"}));
  EXPECT_TRUE(ThrowsWith([&] { parse_one("w", 0, {4}, 64); }, {"tensor 'w'", "[64, 80)", "64-byte data section"}));
  EXPECT_TRUE(ThrowsWith([&] { parse_one("w", 0, {4}, uint64_t{1} << 63); }, {"tensor 'w'", "outside"}));
  Bytes overlap = Header(2, 0);
  TensorInfo(overlap, "a", 0, {16}, 0);
  TensorInfo(overlap, "b", 0, {4}, 32);
  overlap.PadTo(32).Zeros(64);
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(overlap.data); }, {"'a' and 'b' overlap"}));
}

TEST(GgufTest, UnsupportedTensorTypeParsesButCannotBeRead) {
  Bytes b = Header(1, 0);
  TensorInfo(b, "iq", 16, {256}, 0);  // IQ2_XXS: 66 bytes per 256 values
  b.PadTo(32).Zeros(66);
  const GgufFile file = ParseBytes(b.data);
  EXPECT_EQ(file.FindTensor("iq")->nbytes, 66u);
  EXPECT_TRUE(ThrowsWith([&] { file.Tensor("iq"); }, {"bad.gguf", "tensor 'iq'", "IQ2_XXS", "does not support", "Q4_K"}));
}

TEST(GgufTest, WriterRejectsWhatGgufCannotHold) {
  GgufWriter writer;
  EXPECT_TRUE(ThrowsWith([&] { writer.AddTensor("x", vt::Tensor::Empty({2, 3, 4, 5, 6}, vt::DType::kF32)); }, {"'x'", "1 to 4"}));
  EXPECT_TRUE(ThrowsWith([&] { writer.AddTensor("x", vt::Tensor::Empty({4}, vt::DType::kF32).Slice(0, 0, 4).View({2, 2}).Transpose(0, 1)); },
                         {"'x'", "contiguous"}));
  writer.AddTensor("y", vt::Tensor::Empty({4}, vt::DType::kF32));
  EXPECT_TRUE(ThrowsWith([&] { writer.AddTensor("y", vt::Tensor::Empty({4}, vt::DType::kF32)); }, {"'y' added twice"}));
  testing::TempDir dir;
  writer.AddTensor("z", vt::DType::kF32, {4}, [] { return vt::Tensor::Empty({5}, vt::DType::kF32); });
  EXPECT_TRUE(ThrowsWith([&] { writer.Write(dir.File("z.gguf")); }, {"'z'", "planned as f32 [4]", "produced f32 [5]"}));
  EXPECT_FALSE(std::ifstream(dir.File("z.gguf")).good());  // no half-written file under the final name
}

}  // namespace
}  // namespace vllm
