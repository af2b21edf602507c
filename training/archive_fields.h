// Named fields of the training layer's restart archives (LibTorch's serialize archives, the
// engine's checkpoint encoding, src/training_checkpoint.h): byte strings, integers and doubles
// written and read with messages that name a missing or wrong field.
#pragma once

#include <torch/serialize.h>

#include <cstdint>
#include <string>

namespace otf::archive_fields {

void write_bytes(torch::serialize::OutputArchive& archive, const std::string& key,
                 const std::string& bytes);
void write_int(torch::serialize::OutputArchive& archive, const std::string& key, int64_t value);
void write_double(torch::serialize::OutputArchive& archive, const std::string& key, double value);
void write_string(torch::serialize::OutputArchive& archive, const std::string& key,
                  const std::string& value);

// Each throws std::runtime_error naming `what` (the archive) and the field when it is missing or
// of another kind.
std::string read_bytes(torch::serialize::InputArchive& archive, const std::string& key,
                       const std::string& what);
int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key,
                 const std::string& what);
double read_double(torch::serialize::InputArchive& archive, const std::string& key,
                   const std::string& what);
std::string read_string(torch::serialize::InputArchive& archive, const std::string& key,
                        const std::string& what);
torch::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key,
                          const std::string& what);

std::string to_bytes(torch::serialize::OutputArchive& archive);
// Throws std::runtime_error "<what> is damaged or not ..." for bytes that are no archive.
void from_bytes(torch::serialize::InputArchive& archive, const std::string& bytes,
                const std::string& what);

}  // namespace otf::archive_fields
