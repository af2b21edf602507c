#include "model_session.h"

#include "model_file.h"
#include "potential.h"
#include "kokkos_device.h"
#include "potential_evaluator.h"
#include "precision.h"
#include "resident_evaluator.h"

#include <torch/torch.h>

#include <utility>

namespace otf {


std::string model_bytes_from_path(const std::string &path)
{
  return save_model_to_bytes(*load_model_or_spec(path));
}

namespace {

BorrowedArray borrowed(const void *data, BorrowedArray::Element element, int rank, int64_t rows,
                       int64_t columns, int64_t row_stride, int64_t column_stride)
{
  BorrowedArray array;
  array.data = const_cast<void *>(data);
  array.element = element;
  array.rank = rank;
  array.extent[0] = rows;
  array.extent[1] = columns;
  array.stride[0] = row_stride;
  array.stride[1] = column_stride;
  return array;
}

// The array as a tensor on `device` over the caller's memory (undefined when not given).
torch::Tensor tensor_over(const BorrowedArray &array, const torch::Device &device)
{
  if (array.data == nullptr) return {};
  const auto dtype =
      array.element == BorrowedArray::Element::Int32 ? torch::kInt32 : torch::kFloat64;
  const auto options = torch::TensorOptions().dtype(dtype).device(device);
  if (array.rank == 1) return torch::from_blob(array.data, {array.extent[0]}, {array.stride[0]}, options);
  return torch::from_blob(array.data, {array.extent[0], array.extent[1]},
                          {array.stride[0], array.stride[1]}, options);
}

}    // namespace

BorrowedArray borrowed_vector(const int *data, int64_t extent, int64_t stride)
{
  return borrowed(data, BorrowedArray::Element::Int32, 1, extent, 1, stride, 1);
}

BorrowedArray borrowed_vector(double *data, int64_t extent, int64_t stride)
{
  return borrowed(data, BorrowedArray::Element::Float64, 1, extent, 1, stride, 1);
}

BorrowedArray borrowed_matrix(const int *data, int64_t rows, int64_t columns, int64_t row_stride,
                              int64_t column_stride)
{
  return borrowed(data, BorrowedArray::Element::Int32, 2, rows, columns, row_stride,
                  column_stride);
}

BorrowedArray borrowed_matrix(const double *data, int64_t rows, int64_t columns,
                              int64_t row_stride, int64_t column_stride)
{
  return borrowed(data, BorrowedArray::Element::Float64, 2, rows, columns, row_stride,
                  column_stride);
}

struct ModelSession::Impl {
  Impl(std::shared_ptr<Potential> loaded, EvaluatorOptions options) :
      potential(std::move(loaded)), evaluator(potential, options), resident(potential, options)
  {
  }
  std::shared_ptr<Potential> potential;
  PotentialEvaluator evaluator;
  ResidentEvaluator resident;
  // The type map on the model's device, rebuilt when the map or the device changes.
  std::vector<int> species_of_type;
  torch::Tensor species_of_type_tensor;
};

ModelSession::ModelSession(const std::string &model_bytes, Precision precision,
                           int64_t chunk_size)
{
  EvaluatorOptions options;
  options.precision = precision;
  options.chunk_size = chunk_size;
  impl_ = std::make_unique<Impl>(load_model_from_bytes(model_bytes), options);
}

ModelSession::~ModelSession() = default;

const std::vector<std::string> &ModelSession::elements() const
{
  return impl_->evaluator.potential().spec().elements;
}

int ModelSession::species_index(const std::string &element) const
{
  return static_cast<int>(impl_->evaluator.potential().spec().species_index(element));
}

double ModelSession::cutoff() const
{
  return impl_->evaluator.potential().cutoff();
}

const std::string &ModelSession::units() const
{
  return impl_->evaluator.potential().spec().units;
}

int64_t ModelSession::committee_size() const
{
  return impl_->evaluator.potential().committee_size();
}

const std::string &ModelSession::dtype() const
{
  return impl_->evaluator.potential().spec().dtype;
}

const std::string &ModelSession::architecture() const
{
  return impl_->evaluator.potential().spec().architecture;
}

std::string ModelSession::precision_name() const
{
  return to_string(impl_->evaluator.options().precision);
}

int64_t ModelSession::chunk_size() const
{
  return impl_->evaluator.options().chunk_size;
}

int64_t ModelSession::optimizer_steps() const
{
  return impl_->evaluator.potential().training_metadata().optimizer_steps;
}

void ModelSession::set_intra_op_threads(int threads)
{
  if (threads >= 1 && torch::get_num_threads() != threads) torch::set_num_threads(threads);
}

EvaluationTotals ModelSession::evaluate(const AtomicSystemView &system,
                                        const EvaluationOutputs &outputs)
{
  return impl_->evaluator.evaluate(system, outputs);
}

std::string ModelSession::place_on_kokkos_device(const std::string &execution_space, int device_id)
{
  const torch::Device device = torch_device_for_kokkos(execution_space, device_id);
  impl_->potential->to(device);
  return device.str();
}

std::string ModelSession::device_name() const
{
  return impl_->potential->device().str();
}

EvaluationTotals ModelSession::evaluate_resident(const ResidentArrays &arrays,
                                                 const std::vector<int> &species_of_type,
                                                 double *host_uncertainty)
{
  Impl &s = *impl_;
  const torch::Device device = s.potential->device();
  if (s.species_of_type != species_of_type || !s.species_of_type_tensor.defined() ||
      s.species_of_type_tensor.device() != device) {
    s.species_of_type = species_of_type;
    s.species_of_type_tensor = torch::tensor(species_of_type, torch::kInt32).to(device);
  }
  ResidentSystem system;
  system.num_atoms = arrays.num_atoms;
  system.positions = tensor_over(arrays.positions, device);
  system.types = tensor_over(arrays.types, device);
  system.species_of_type = s.species_of_type_tensor;
  system.centers = tensor_over(arrays.centers, device);
  system.neighbor_counts = tensor_over(arrays.neighbor_counts, device);
  system.neighbors = tensor_over(arrays.neighbors, device);
  system.neighbor_index_mask = arrays.neighbor_index_mask;

  ResidentOutputs outputs;
  outputs.forces = tensor_over(arrays.forces, device);
  outputs.atom_energy = tensor_over(arrays.atom_energy, device);
  outputs.atom_virial = tensor_over(arrays.atom_virial, device);
  torch::Tensor host_spread;
  if (host_uncertainty != nullptr) {
    host_spread = torch::from_blob(host_uncertainty, {arrays.num_atoms}, torch::kFloat64);
    // On the CPU the results go straight into the host array; from a GPU, one copy back.
    outputs.atom_energy_uncertainty =
        device.is_cpu() ? host_spread : torch::zeros({arrays.num_atoms}, host_spread.options().device(device));
  }
  const EvaluationTotals totals = s.resident.evaluate(system, outputs);
  if (host_uncertainty != nullptr && !device.is_cpu()) host_spread.add_(outputs.atom_energy_uncertainty.cpu());
  return totals;
}

std::shared_ptr<Potential> ModelSession::potential() const
{
  return impl_->potential;
}

}    // namespace otf
