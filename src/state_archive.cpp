#include "state_archive.h"

#include <cstring>
#include <sstream>

namespace otf::state_archive {
namespace {

[[noreturn]] void missing(const std::string& key, const std::string& what,
                          const std::string& expected) {
  throw std::runtime_error(what + " has no " + expected + " field '" + key +
                           "' (damaged, or written by another version)");
}

c10::IValue read_value(torch::serialize::InputArchive& archive, const std::string& key,
                       const std::string& what, const std::string& expected) {
  c10::IValue value;
  if (!archive.try_read(key, value)) missing(key, what, expected);
  return value;
}

}  // namespace

void write_header(torch::serialize::OutputArchive& archive, const StateKind& kind) {
  write_string(archive, "kind", kind.tag);
  write_int(archive, "format", kind.format);
}

std::string to_bytes(torch::serialize::OutputArchive& archive) {
  std::ostringstream bytes;
  archive.save_to(bytes);
  return bytes.str();
}

int64_t load_checked(torch::serialize::InputArchive& archive, const std::string& bytes,
                     const StateKind& kind) {
  try {
    std::istringstream stream(bytes);
    archive.load_from(stream);
  } catch (const c10::Error& error) {
    throw std::runtime_error(kind.not_this + ", or a damaged one (" +
                             error.what_without_backtrace() + ")");
  }
  c10::IValue tag;
  if (!archive.try_read("kind", tag) || !tag.isString() || tag.toStringRef() != kind.tag)
    throw std::runtime_error(kind.not_this + " (another kind of OTF-Torch archive?)");
  const int64_t format = read_int(archive, "format", kind.noun);
  if (format > kind.format)
    throw std::runtime_error(kind.noun + " format " + std::to_string(format) +
                             " is newer than this OTF-Torch reads (" + std::to_string(kind.format) +
                             "); update OTF-Torch");
  return format;
}

void load(torch::serialize::InputArchive& archive, const std::string& bytes,
          const std::string& what) {
  try {
    std::istringstream stream(bytes);
    archive.load_from(stream);
  } catch (const c10::Error& error) {
    throw std::runtime_error(what + " is damaged or not an OTF-Torch archive (" +
                             error.what_without_backtrace() + ")");
  }
}

void write_int(torch::serialize::OutputArchive& archive, const std::string& key, int64_t value) {
  archive.write(key, c10::IValue(value));
}

void write_double(torch::serialize::OutputArchive& archive, const std::string& key, double value) {
  archive.write(key, c10::IValue(value));
}

void write_string(torch::serialize::OutputArchive& archive, const std::string& key,
                  const std::string& value) {
  archive.write(key, c10::IValue(value));
}

void write_bytes(torch::serialize::OutputArchive& archive, const std::string& key,
                 const std::string& bytes) {
  torch::Tensor tensor = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  if (!bytes.empty()) std::memcpy(tensor.data_ptr(), bytes.data(), bytes.size());
  archive.write(key, tensor);
}

int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key,
                 const std::string& what) {
  const c10::IValue value = read_value(archive, key, what, "integer");
  if (!value.isInt()) missing(key, what, "integer");
  return value.toInt();
}

double read_double(torch::serialize::InputArchive& archive, const std::string& key,
                   const std::string& what) {
  const c10::IValue value = read_value(archive, key, what, "number");
  if (!value.isDouble()) missing(key, what, "number");
  return value.toDouble();
}

std::string read_string(torch::serialize::InputArchive& archive, const std::string& key,
                        const std::string& what) {
  const c10::IValue value = read_value(archive, key, what, "text");
  if (!value.isString()) missing(key, what, "text");
  return value.toStringRef();
}

std::string read_bytes(torch::serialize::InputArchive& archive, const std::string& key,
                       const std::string& what) {
  const torch::Tensor tensor = read_tensor(archive, key, what);
  if (tensor.scalar_type() != torch::kUInt8 || tensor.dim() != 1) missing(key, what, "byte");
  const torch::Tensor bytes = tensor.contiguous();
  return std::string(static_cast<const char*>(bytes.data_ptr()),
                     static_cast<std::size_t>(bytes.numel()));
}

torch::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key,
                          const std::string& what) {
  torch::Tensor tensor;
  if (!archive.try_read(key, tensor)) missing(key, what, "tensor");
  return tensor;
}

}  // namespace otf::state_archive
