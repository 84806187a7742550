// safetensors: writer/reader round trip, zero-copy views, sharded folders, and
// malformed headers failing with the file, the tensor, and expected vs found.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "loader_test_util.h"
#include "vllm/model_loader/safetensors.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm {
namespace {

using nlohmann::json;
using testing::Bytes;
using testing::ThrowsWith;

SafetensorsFile ParseBytes(const std::vector<uint8_t>& bytes) {
  return SafetensorsFile::Parse(MappedFile::FromBytes(bytes, "bad.safetensors"));
}

// A file with the given header text followed by `data_bytes` zero bytes.
std::vector<uint8_t> WithHeader(const std::string& header, size_t data_bytes) {
  Bytes b;
  b.U64(header.size()).Raw(header).Zeros(data_bytes);
  return b.data;
}

std::string Entry(const std::string& dtype, const std::string& shape, uint64_t begin, uint64_t end) {
  return "{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(begin) + "," +
         std::to_string(end) + "]}";
}

TEST(SafetensorsTest, WriterAndReaderRoundTrip) {
  testing::TempDir dir;
  SafetensorsWriter writer;
  writer.SetMetadata("format", "pt");
  vt::Tensor f32 = vt::Tensor::FromVector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  vt::Tensor bf16 = vt::Tensor::Empty({3}, vt::DType::kBF16);
  bf16.CopyFrom(vt::Tensor::FromVector(std::vector<float>{0.5f, -1, 2}, {3}));
  vt::Tensor i64 = vt::Tensor::FromVector(std::vector<int64_t>{7, -8}, {2});
  writer.AddTensor("a", f32);
  writer.AddTensor("b", bf16);
  writer.AddTensor("c", i64);
  writer.Write(dir.File("m.safetensors"));
  const SafetensorsFile file = SafetensorsFile::Open(dir.File("m.safetensors"));
  EXPECT_EQ(file.metadata().at("format"), "pt");
  ASSERT_EQ(file.tensors().size(), 3u);
  EXPECT_EQ(file.FindTensor("a")->dtype_name, "F32");
  EXPECT_EQ(file.Tensor(*file.FindTensor("a")).ToFloatVector(), f32.ToFloatVector());
  EXPECT_EQ(file.Tensor(*file.FindTensor("b")).ToFloatVector(), bf16.ToFloatVector());
  EXPECT_EQ(file.Tensor(*file.FindTensor("c")).ToIntVector(), (std::vector<int64_t>{7, -8}));
}

TEST(SafetensorsTest, TensorsAreViewsIntoTheFile) {
  std::string header = "{\"w\":" + Entry("F32", "[2,2]", 0, 16) + "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // data 8-byte aligned, as writers pad it
  std::vector<uint8_t> bytes = WithHeader(header, 16);
  auto mapped = MappedFile::FromBytes(bytes, "view.safetensors");
  const SafetensorsFile file = SafetensorsFile::Parse(mapped);
  vt::Tensor t = file.Tensor(*file.FindTensor("w"));
  EXPECT_EQ(static_cast<const uint8_t*>(t.data()), mapped->data() + 8 + header.size());
}

TEST(SafetensorsTest, MisalignedTensorsAreCopiedNotMisread) {
  // A bf16 tensor of 3 values leaves the next f32 tensor 2-byte aligned.
  const std::string header = "{\"a\":" + Entry("BF16", "[3]", 0, 6) + ",\"b\":" + Entry("F32", "[1]", 6, 10) + "}  ";
  Bytes b;
  b.U64(header.size()).Raw(header).Zeros(6).Put<float>(1.5f);
  const SafetensorsFile file = ParseBytes(b.data);
  EXPECT_EQ(file.Tensor(*file.FindTensor("b")).ToFloatVector(), std::vector<float>{1.5f});
}

TEST(SafetensorsTest, EveryTruncationIsAnErrorNotACrash) {
  const std::vector<uint8_t> bytes = WithHeader("{\"w\":" + Entry("F32", "[2,2]", 0, 16) + "}", 16);
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + n);
    EXPECT_TRUE(ThrowsWith([&] { ParseBytes(prefix); }, {"bad.safetensors"})) << n << " bytes";
  }
}

TEST(SafetensorsTest, BadHeaders) {
  Bytes huge;
  huge.U64(uint64_t{1} << 62).Raw("{}");
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(huge.data); }, {"bad.safetensors", "header length 4611686018427387904", "beyond"}));
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(WithHeader("{\"w\": [", 0)); }, {"bad.safetensors", "not valid JSON"}));
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(WithHeader("[1, 2]", 0)); }, {"JSON array", "expected an object"}));
  const std::string w = Entry("F32", "[1]", 0, 4);
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(WithHeader("{\"w\":" + w + ",\"w\":" + w + "}", 4)); },
                         {"tensor 'w' appears twice"}));
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(WithHeader("{\"w\":" + Entry("F31", "[1]", 0, 4) + "}", 4)); },
                         {"tensor 'w'", "unknown dtype 'F31'"}));
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(WithHeader("{\"w\":" + Entry("F32", "[3]", 0, 8) + "}", 8)); },
                         {"tensor 'w'", "needs 3 x 4 bytes", "span 8"}));
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(WithHeader("{\"w\":" + Entry("F32", "[2]", 8, 16) + "}", 8)); },
                         {"tensor 'w'", "beyond the 8-byte data section"}));
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(WithHeader("{\"w\":" + Entry("F32", "[0]", 8, 4) + "}", 8)); },
                         {"tensor 'w'", "negative range"}));
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(WithHeader("{\"w\":" + Entry("F32", "[-1]", 0, 4) + "}", 4)); },
                         {"a dim of tensor 'w'", "non-negative"}));
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(WithHeader("{\"w\":" + Entry("F32", "[4294967296,4294967296]", 0, 4) + "}", 4)); },
                         {"tensor 'w'", "absurd shape"}));
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(WithHeader("{\"w\":{\"dtype\":\"F32\"}}", 0)); },
                         {"tensor 'w'", "needs an object with dtype, shape and data_offsets"}));
  EXPECT_TRUE(ThrowsWith([&] { ParseBytes(WithHeader("{\"a\":" + Entry("F32", "[2]", 0, 8) + ",\"b\":" + Entry("F32", "[2]", 4, 12) + "}", 12)); },
                         {"'a' and 'b' overlap"}));
}

TEST(SafetensorsTest, UnsupportedDtypeParsesButCannotBeLoaded) {
  const SafetensorsFile file = ParseBytes(WithHeader("{\"w\":" + Entry("F64", "[1]", 0, 8) + "}", 8));
  EXPECT_TRUE(ThrowsWith([&] { file.Tensor(*file.FindTensor("w")); }, {"bad.safetensors", "tensor 'w'", "F64", "BF16"}));
}

TEST(SafetensorsTest, ShardedCheckpointFolder) {
  testing::TempDir dir;
  for (int shard = 0; shard < 2; ++shard) {
    SafetensorsWriter w;
    w.AddTensor(shard == 0 ? "a" : "b", vt::Tensor::FromVector(std::vector<float>{1.0f + shard}, {1}));
    w.Write(dir.File("s" + std::to_string(shard) + ".safetensors"));
  }
  auto write_index = [&](const json& map) { std::ofstream(dir.File("model.safetensors.index.json")) << json{{"weight_map", map}}.dump(); };
  write_index({{"a", "s0.safetensors"}, {"b", "s1.safetensors"}});
  const SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::Open(dir.path());
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ckpt.Tensor("b").ToFloatVector(), std::vector<float>{2.0f});
  EXPECT_NE(ckpt.FileOf("b").find("s1.safetensors"), std::string::npos);

  write_index({{"a", "s0.safetensors"}, {"b", "s0.safetensors"}});
  EXPECT_TRUE(ThrowsWith([&] { SafetensorsCheckpoint::Open(dir.path()); }, {"index.json", "tensor 'b'", "s0.safetensors", "does not contain it"}));
  write_index({{"a", "../s0.safetensors"}});
  EXPECT_TRUE(ThrowsWith([&] { SafetensorsCheckpoint::Open(dir.path()); }, {"'../s0.safetensors'", "inside the folder"}));
  write_index({{"a", "missing.safetensors"}});
  EXPECT_TRUE(ThrowsWith([&] { SafetensorsCheckpoint::Open(dir.path()); }, {"missing.safetensors", "cannot open"}));
  SafetensorsWriter dup;
  dup.AddTensor("a", vt::Tensor::FromVector(std::vector<float>{3}, {1}));
  dup.Write(dir.File("s1.safetensors"));
  write_index({{"a", "s0.safetensors"}, {"x", "s1.safetensors"}});
  EXPECT_TRUE(ThrowsWith([&] { SafetensorsCheckpoint::Open(dir.path()); }, {"tensor 'a' appears in both"}));
  std::filesystem::remove(dir.File("model.safetensors.index.json"));
  EXPECT_TRUE(ThrowsWith([&] { SafetensorsCheckpoint::Open(dir.path()); }, {"no model.safetensors or model.safetensors.index.json"}));
}

}  // namespace
}  // namespace vllm
