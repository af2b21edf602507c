// The model file format (model_file.h): preamble, JSON header, torch archive of every parameter and
// buffer by its recursive name. Checks run cheapest and most telling first (magic, version,
// lengths, checksum) so that a damaged or foreign file is named as such before anything is parsed.
#include "model_file.h"

#include <torch/serialize.h>

#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "fnv1a.h"
#include "potential_registry.h"

namespace otf {
namespace {

constexpr char kMagic[] = "OTF-Torch model\n";
constexpr size_t kMagicSize = sizeof(kMagic) - 1;  // 16, no terminator in the file
constexpr size_t kPreambleSize = kMagicSize + 4 + 8 + 8 + 8;
constexpr const char* kFormatName = "otf-torch-model";

// Little-endian whatever the host is, so files move between machines.
template <typename Unsigned>
void append_le(std::string& out, Unsigned value) {
  for (size_t i = 0; i < sizeof(Unsigned); ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

template <typename Unsigned>
Unsigned read_le(const std::string& bytes, size_t offset) {
  Unsigned value = 0;
  for (size_t i = 0; i < sizeof(Unsigned); ++i)
    value |= static_cast<Unsigned>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  return value;
}

// Parameters, then buffers, by recursive name ("members.0.layer.weight").
std::vector<std::pair<std::string, torch::Tensor>> named_tensors(const Potential& potential) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& item : potential.named_parameters(/*recurse=*/true))
    tensors.emplace_back(item.key(), item.value());
  for (const auto& item : potential.named_buffers(/*recurse=*/true))
    tensors.emplace_back(item.key(), item.value());
  return tensors;
}

std::string describe(const torch::Tensor& tensor) {
  std::ostringstream text;
  text << c10::toString(tensor.scalar_type()) << tensor.sizes();
  return text.str();
}

[[noreturn]] void mismatch(const std::string& name, const std::string& problem) {
  throw std::runtime_error("header/weights mismatch: tensor '" + name + "' " + problem);
}

// The whole file, or an error message naming the system's reason.
std::string read_file(const std::string& path, const std::string& what) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr)
    throw std::runtime_error("cannot read " + what + " '" + path + "': " + std::strerror(errno));
  std::string bytes;
  char buffer[1 << 16];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) bytes.append(buffer, n);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) throw std::runtime_error("cannot read " + what + " '" + path + "': read error");
  return bytes;
}

}  // namespace

std::string save_model_to_bytes(const Potential& potential) {
  const auto tensors = named_tensors(potential);
  torch::serialize::OutputArchive archive;
  nlohmann::json names = nlohmann::json::array();
  std::set<std::string> seen;
  for (const auto& [name, tensor] : tensors) {
    if (!seen.insert(name).second)
      throw std::logic_error("save_model: a parameter and a buffer are both named '" + name + "'");
    // Host copies: a model trained on a GPU makes a file any machine loads.
    archive.write(name, tensor.detach().cpu());
    names.push_back(name);
  }
  std::ostringstream payload_stream;
  archive.save_to(payload_stream);
  const std::string payload = payload_stream.str();

  const nlohmann::json header_json{{"format", kFormatName},
                                   {"spec", to_json(potential.spec())},
                                   {"training", potential.training_metadata().to_json()},
                                   {"tensors", names},
                                   {"otf_torch_version", OTF_VERSION}};
  const std::string header = header_json.dump(1);

  std::string bytes(kMagic, kMagicSize);
  append_le<uint32_t>(bytes, kModelFormatVersion);
  append_le<uint64_t>(bytes, header.size());
  append_le<uint64_t>(bytes, payload.size());
  append_le<uint64_t>(
      bytes, fnv1a64(payload.data(), payload.size(), fnv1a64(header.data(), header.size())));
  bytes.reserve(bytes.size() + header.size() + payload.size());
  bytes += header;
  bytes += payload;
  return bytes;
}

std::shared_ptr<Potential> load_model_from_bytes(const std::string& bytes) {
  if (bytes.empty()) throw std::runtime_error("not an OTF-Torch model file (it is empty)");
  const size_t compared = std::min(bytes.size(), kMagicSize);
  if (bytes.compare(0, compared, kMagic, compared) != 0)
    throw std::runtime_error("not an OTF-Torch model file");
  if (bytes.size() < kPreambleSize)
    throw std::runtime_error("truncated: the preamble needs " + std::to_string(kPreambleSize) +
                             " bytes, file has " + std::to_string(bytes.size()));
  const auto version = read_le<uint32_t>(bytes, kMagicSize);
  if (version > kModelFormatVersion)
    throw std::runtime_error("written by a newer OTF-Torch (model format version " +
                             std::to_string(version) + "; this build reads up to " +
                             std::to_string(kModelFormatVersion) + ")");
  if (version == 0) throw std::runtime_error("not an OTF-Torch model file (format version 0)");
  const auto header_size = read_le<uint64_t>(bytes, kMagicSize + 4);
  const auto payload_size = read_le<uint64_t>(bytes, kMagicSize + 12);
  const auto checksum = read_le<uint64_t>(bytes, kMagicSize + 20);
  // Compared without adding first: damaged lengths may be near 2^64 and overflow a sum.
  const uint64_t available = bytes.size() - kPreambleSize;
  if (header_size > available || payload_size > available - header_size) {
    const uint64_t limit = std::numeric_limits<uint64_t>::max() - kPreambleSize;
    const uint64_t expected = header_size > limit - std::min(payload_size, limit)
                                  ? std::numeric_limits<uint64_t>::max()
                                  : kPreambleSize + header_size + payload_size;
    throw std::runtime_error("truncated: header says " + std::to_string(expected) +
                             " bytes, file has " + std::to_string(bytes.size()));
  }
  if (header_size + payload_size != available)
    throw std::runtime_error(
        "corrupt: header says " + std::to_string(kPreambleSize + header_size + payload_size) +
        " bytes, file has " + std::to_string(bytes.size()) + " (trailing bytes)");
  const char* header_data = bytes.data() + kPreambleSize;
  const char* payload_data = header_data + header_size;
  if (fnv1a64(payload_data, payload_size, fnv1a64(header_data, header_size)) != checksum)
    throw std::runtime_error("corrupt: checksum mismatch");

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_data, header_data + header_size);
  } catch (const nlohmann::json::parse_error& error) {
    throw std::runtime_error(std::string("corrupt: the header is not JSON: ") + error.what());
  }
  if (!header.is_object() || !header.contains("format") || header.at("format") != kFormatName)
    throw std::runtime_error("not an OTF-Torch model file (header format is not '" +
                             std::string(kFormatName) + "')");
  for (const char* key : {"spec", "training", "tensors"})
    if (!header.contains(key))
      throw std::runtime_error(std::string("corrupt: the header has no '") + key + "'");

  ModelSpec spec;
  TrainingMetadata metadata;
  try {
    spec = model_spec_from_json(header.at("spec"));
    metadata = TrainingMetadata::from_json(header.at("training"));
  } catch (const std::invalid_argument& error) {
    throw std::runtime_error(std::string("invalid header: ") + error.what());
  }
  const auto known = registered_architectures();
  if (std::find(known.begin(), known.end(), spec.architecture) == known.end()) {
    std::string listed;
    for (const auto& name : known) listed += (listed.empty() ? "" : ", ") + name;
    throw std::runtime_error("unknown architecture '" + spec.architecture +
                             "' (this build knows: " + listed + ")");
  }
  std::shared_ptr<Potential> potential;
  try {
    potential = create_potential(spec);
  } catch (const std::invalid_argument& error) {
    throw std::runtime_error(std::string("cannot build the model the header describes: ") +
                             error.what());
  }

  torch::serialize::InputArchive archive;
  try {
    archive.load_from(payload_data, payload_size, torch::Device(torch::kCPU));
  } catch (const c10::Error& error) {
    throw std::runtime_error(std::string("corrupt: the weights cannot be read: ") +
                             error.what_without_backtrace());
  }
  const auto tensors = named_tensors(*potential);
  std::set<std::string> model_names;
  for (const auto& item : tensors) model_names.insert(item.first);
  const auto& header_names = header.at("tensors");
  if (!header_names.is_array()) throw std::runtime_error("corrupt: header 'tensors' is not a list");
  for (const auto& name : header_names) {
    if (!name.is_string())
      throw std::runtime_error("corrupt: header 'tensors' holds " + name.dump());
    if (model_names.count(name.get<std::string>()) == 0)
      mismatch(name.get<std::string>(), "is in the file but not in a '" + spec.architecture +
                                            "' model built from the header's spec");
  }
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : tensors) {
    torch::Tensor stored;
    if (!archive.try_read(name, stored) || !stored.defined())
      mismatch(name, "of the model is missing from the file's weights");
    if (stored.scalar_type() != tensor.scalar_type() || stored.sizes() != tensor.sizes())
      mismatch(name,
               "is " + describe(stored) + " in the file, the model expects " + describe(tensor));
    // In place, so that references the model holds (members' submodules, registered buffers)
    // see the loaded values; same dtype, so the copy is bitwise.
    tensor.copy_(stored);
  }
  potential->training_metadata() = metadata;
  return potential;
}

namespace {

void check_finite_for_saving(const std::string& name, const torch::Tensor& tensor,
                             const std::string& path) {
  if (!tensor.is_floating_point()) return;
  const int64_t bad = tensor.detach().isfinite().logical_not().sum().item<int64_t>();
  if (bad == 0) return;
  throw std::runtime_error("cannot write model file '" + path + "': the model's '" + name +
                           "' holds " + std::to_string(bad) +
                           " non-finite value(s) (training diverged); the file was left as it was");
}

}  // namespace

void save_model(const Potential& potential, const std::string& path) {
  // A diverged training run must never overwrite a good model with NaN: the old file stays.
  for (const auto& item : potential.named_parameters(/*recurse=*/true).pairs())
    check_finite_for_saving(item.first, item.second, path);
  for (const auto& item : potential.named_buffers(/*recurse=*/true).pairs())
    check_finite_for_saving(item.first, item.second, path);
  const std::string bytes = save_model_to_bytes(potential);
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr)
    throw std::runtime_error("cannot write model file '" + path + "': cannot create '" + temporary +
                             "': " + std::strerror(errno));
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  // fsync before rename: the final name must never point at data still in flight.
  const bool flushed = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  const int saved_errno = errno;
  const bool closed = std::fclose(file) == 0;
  if (!written || !flushed || !closed) {
    std::remove(temporary.c_str());
    throw std::runtime_error("cannot write model file '" + path + "': writing '" + temporary +
                             "' failed: " + std::strerror(saved_errno));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(temporary.c_str());
    throw std::runtime_error("cannot write model file '" + path + "': renaming '" + temporary +
                             "' failed: " + std::strerror(rename_errno));
  }
}

std::shared_ptr<Potential> load_model(const std::string& path) {
  const std::string bytes = read_file(path, "model file");
  try {
    return load_model_from_bytes(bytes);
  } catch (const std::exception& error) {
    throw std::runtime_error("cannot read model file '" + path + "': " + error.what());
  }
}

std::shared_ptr<Potential> load_model_or_spec(const std::string& path) {
  const std::string bytes = read_file(path, "model or spec file");
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && bytes[first] == '{') {
    const ModelSpec spec = read_model_spec_file(path);
    try {
      return create_potential(spec);
    } catch (const std::invalid_argument& error) {
      // The architecture checks its hyperparameters; say which file they came from.
      throw std::invalid_argument(std::string(error.what()) + " [in file '" + path + "']");
    }
  }
  try {
    return load_model_from_bytes(bytes);
  } catch (const std::exception& error) {
    throw std::runtime_error("cannot read model file '" + path + "': " + error.what());
  }
}

}  // namespace otf
