// safetensors parsing, validation and writing (see safetensors.h).
#include "vllm/model_loader/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "vllm/model_loader/gguf_reader.h"
#include "vt/error.h"

namespace vllm {
namespace {

using nlohmann::json;

// The safetensors format caps the header at 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DTypeEntry {
  const char* name;
  int64_t bytes;
  std::optional<vt::DType> dtype;
};

constexpr DTypeEntry kDTypes[] = {
    {"F32", 4, vt::DType::kF32}, {"F16", 2, vt::DType::kF16},   {"BF16", 2, vt::DType::kBF16},
    {"I32", 4, vt::DType::kI32}, {"I64", 8, vt::DType::kI64},   {"F64", 8, std::nullopt},
    {"I16", 2, std::nullopt},    {"U16", 2, std::nullopt},      {"U32", 4, std::nullopt},
    {"U64", 8, std::nullopt},    {"I8", 1, std::nullopt},       {"U8", 1, std::nullopt},
    {"BOOL", 1, std::nullopt},   {"F8_E4M3", 1, std::nullopt},  {"F8_E5M2", 1, std::nullopt},
    {"F8_E8M0", 1, std::nullopt},
};

const DTypeEntry* FindDType(const std::string& name) {
  for (const DTypeEntry& e : kDTypes) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

const char* SafetensorsName(vt::DType dtype) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.dtype == dtype) return e.name;
  }
  throw vt::Error(std::string("safetensors cannot hold vt dtype ") + vt::DTypeName(dtype));
}

// Parses the header JSON, rejecting a name that appears twice (JSON parsers keep
// the last silently).
json ParseHeaderJson(const std::string& source, const char* begin, const char* end) {
  std::set<std::string> seen;
  std::string duplicate;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && !seen.insert(parsed.get<std::string>()).second) {
      if (duplicate.empty()) duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json header;
  try {
    header = json::parse(begin, end, on_event);
  } catch (const json::exception& e) {
    throw vt::Error(source + ": the safetensors header is not valid JSON: " + e.what());
  }
  if (!duplicate.empty()) throw vt::Error(source + ": tensor '" + duplicate + "' appears twice in the header");
  if (!header.is_object()) {
    throw vt::Error(source + ": the safetensors header is JSON " + std::string(header.type_name()) +
                    ", expected an object");
  }
  return header;
}

uint64_t NonNegative(const std::string& source, const std::string& what, const json& v) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0)) {
    throw vt::Error(source + ": " + what + " is " + v.dump() + ", expected a non-negative integer");
  }
  return v.get<uint64_t>();
}

SafetensorsTensorInfo ParseEntry(const std::string& source, const std::string& name, const json& entry,
                                 uint64_t data_size) {
  const std::string what = "tensor '" + name + "'";
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets")) {
    throw vt::Error(source + ": " + what + " needs an object with dtype, shape and data_offsets, found " +
                    entry.dump().substr(0, 200));
  }
  SafetensorsTensorInfo t;
  t.name = name;
  if (!entry["dtype"].is_string()) throw vt::Error(source + ": " + what + " has a non-string dtype");
  t.dtype_name = entry["dtype"].get<std::string>();
  const DTypeEntry* dtype = FindDType(t.dtype_name);
  if (!dtype) throw vt::Error(source + ": " + what + " has unknown dtype '" + t.dtype_name + "'");
  t.dtype = dtype->dtype;
  const json& shape = entry["shape"];
  if (!shape.is_array()) throw vt::Error(source + ": " + what + " has shape " + shape.dump() + ", expected an array");
  int64_t numel = 1;
  for (const json& d : shape) {
    const uint64_t size = NonNegative(source, "a dim of " + what, d);
    if (size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(numel, static_cast<int64_t>(size), &numel)) {
      throw vt::Error(source + ": " + what + " has an absurd shape " + shape.dump());
    }
    t.shape.push_back(static_cast<int64_t>(size));
  }
  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    throw vt::Error(source + ": " + what + " has data_offsets " + offsets.dump() + ", expected [begin, end]");
  }
  t.begin = NonNegative(source, "the data begin of " + what, offsets[0]);
  t.end = NonNegative(source, "the data end of " + what, offsets[1]);
  int64_t nbytes = 0;
  if (t.end < t.begin || __builtin_mul_overflow(numel, dtype->bytes, &nbytes) ||
      t.end - t.begin != static_cast<uint64_t>(nbytes)) {
    throw vt::Error(source + ": " + what + " (" + t.dtype_name + " " + shape.dump() + ") needs " +
                    std::to_string(numel) + " x " + std::to_string(dtype->bytes) + " bytes, but data_offsets " +
                    offsets.dump() + " span " + (t.end < t.begin ? "a negative range" : std::to_string(t.end - t.begin)));
  }
  if (t.end > data_size) {
    throw vt::Error(source + ": " + what + " has data_offsets " + offsets.dump() + " beyond the " +
                    std::to_string(data_size) + "-byte data section (file truncated?)");
  }
  return t;
}

void CheckNoOverlap(const std::string& source, std::vector<SafetensorsTensorInfo> tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i - 1].end > tensors[i].begin && tensors[i].end > tensors[i].begin) {
      throw vt::Error(source + ": tensors '" + tensors[i - 1].name + "' and '" + tensors[i].name +
                      "' overlap in the data section");
    }
  }
}

json ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw vt::Error(path + ": cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw vt::Error(path + ": not valid JSON: " + e.what());
  }
}

}  // namespace

SafetensorsFile SafetensorsFile::Open(const std::string& path) { return Parse(MappedFile::Open(path)); }

SafetensorsFile SafetensorsFile::Parse(std::shared_ptr<const MappedFile> file) {
  SafetensorsFile st;
  st.file_ = std::move(file);
  const std::string& source = st.file_->path();
  const uint64_t size = st.file_->size();
  if (size < 8) {
    throw vt::Error(source + ": truncated file: " + std::to_string(size) +
                    " bytes, a safetensors file starts with an 8-byte header length");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, st.file_->data(), 8);
  if (header_len > size - 8 || header_len > kMaxHeaderBytes) {
    throw vt::Error(source + ": header length " + std::to_string(header_len) + " is beyond the " +
                    std::to_string(size - 8) + " bytes after it" +
                    (header_len > kMaxHeaderBytes ? " (and the 100 MB limit)" : " (file truncated or not safetensors)"));
  }
  const char* text = reinterpret_cast<const char*>(st.file_->data() + 8);
  const json header = ParseHeaderJson(source, text, text + header_len);
  st.data_offset_ = 8 + header_len;
  const uint64_t data_size = size - st.data_offset_;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw vt::Error(source + ": __metadata__ is " + entry.dump() + ", expected an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) throw vt::Error(source + ": __metadata__ key '" + key + "' is not a string");
        st.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    st.index_[name] = st.tensors_.size();
    st.tensors_.push_back(ParseEntry(source, name, entry, data_size));
  }
  CheckNoOverlap(source, st.tensors_);
  return st;
}

const SafetensorsTensorInfo* SafetensorsFile::FindTensor(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

vt::Tensor SafetensorsFile::Tensor(const SafetensorsTensorInfo& info) const {
  if (!info.dtype) {
    throw vt::Error(path() + ": tensor '" + info.name + "' has dtype " + info.dtype_name +
                    ", which vllm-cpp does not load (supported: F32, F16, BF16, I32, I64)");
  }
  return TensorOverFileBytes(file_, file_->data() + data_offset_ + info.begin, info.shape, *info.dtype);
}

// ---- writer ------------------------------------------------------------------------

void SafetensorsWriter::AddTensor(const std::string& name, const vt::Tensor& tensor) {
  if (!tensor.defined() || tensor.device() != vt::kCpu || !tensor.is_contiguous()) {
    throw vt::Error("SafetensorsWriter: tensor '" + name + "' must be a contiguous CPU tensor, got " +
                    tensor.Describe());
  }
  SafetensorsName(tensor.dtype());
  for (const auto& [existing, t] : tensors_) {
    if (existing == name) throw vt::Error("SafetensorsWriter: tensor '" + name + "' added twice");
  }
  tensors_.emplace_back(name, tensor);
}

void SafetensorsWriter::Write(const std::string& path) const {
  json header = json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors_) {
    const uint64_t nbytes = static_cast<uint64_t>(t.nbytes());
    header[name] = {{"dtype", SafetensorsName(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t length = text.size();
  out.write(reinterpret_cast<const char*>(&length), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& [name, t] : tensors_) out.write(static_cast<const char*>(t.data()), t.nbytes());
  if (!out) throw vt::Error(path + ": writing the safetensors file failed");
}

// ---- checkpoint folder -------------------------------------------------------------

SafetensorsCheckpoint SafetensorsCheckpoint::Open(const std::string& folder) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint ckpt;
  ckpt.folder_ = folder;
  const fs::path index_path = fs::path(folder) / "model.safetensors.index.json";
  std::vector<std::string> shard_names;
  json weight_map = json::object();
  if (fs::exists(index_path)) {
    const json index = ReadJsonFile(index_path.string());
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      throw vt::Error(index_path.string() + ": expected an object with a \"weight_map\" object");
    }
    weight_map = index["weight_map"];
    std::set<std::string> unique;
    for (const auto& [name, shard] : weight_map.items()) {
      if (!shard.is_string()) throw vt::Error(index_path.string() + ": weight_map entry '" + name + "' is not a file name");
      const std::string file = shard.get<std::string>();
      if (file.empty() || file.find('/') != std::string::npos || file.find("..") != std::string::npos) {
        throw vt::Error(index_path.string() + ": weight_map entry '" + name + "' names file '" + file +
                        "', expected a file name inside the folder");
      }
      if (unique.insert(file).second) shard_names.push_back(file);
    }
  } else if (fs::exists(fs::path(folder) / "model.safetensors")) {
    shard_names.push_back("model.safetensors");
  } else {
    throw vt::Error(folder + ": no model.safetensors or model.safetensors.index.json in this folder");
  }
  for (const std::string& shard : shard_names) {
    ckpt.files_.push_back(SafetensorsFile::Open((fs::path(folder) / shard).string()));
    const SafetensorsFile& file = ckpt.files_.back();
    for (size_t i = 0; i < file.tensors().size(); ++i) {
      const std::string& name = file.tensors()[i].name;
      auto [it, inserted] = ckpt.where_.emplace(name, Location{ckpt.files_.size() - 1, i});
      if (!inserted) {
        throw vt::Error(folder + ": tensor '" + name + "' appears in both " + ckpt.files_[it->second.file].path() +
                        " and " + file.path());
      }
    }
  }
  for (const auto& [name, shard] : weight_map.items()) {
    if (!ckpt.Has(name) || fs::path(ckpt.FileOf(name)).filename() != shard.get<std::string>()) {
      throw vt::Error(index_path.string() + ": tensor '" + name + "' is listed in " + shard.get<std::string>() +
                      ", but that file does not contain it");
    }
  }
  return ckpt;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, loc] : where_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

const SafetensorsCheckpoint::Location& SafetensorsCheckpoint::Find(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) throw vt::Error(folder_ + ": no tensor named '" + name + "' in the safetensors files");
  return it->second;
}

const SafetensorsTensorInfo& SafetensorsCheckpoint::Info(const std::string& name) const {
  const Location& loc = Find(name);
  return files_[loc.file].tensors()[loc.tensor];
}

const std::string& SafetensorsCheckpoint::FileOf(const std::string& name) const {
  return files_[Find(name).file].path();
}

vt::Tensor SafetensorsCheckpoint::Tensor(const std::string& name) const {
  const Location& loc = Find(name);
  return files_[loc.file].Tensor(files_[loc.file].tensors()[loc.tensor]);
}

}  // namespace vllm
