/* ----------------------------------------------------------------------
   OTF-Torch: the model a LAMMPS style evaluates. The only file of the
   plugin's pair style that includes LibTorch and the potentials layer.
------------------------------------------------------------------------- */

#include "otf_model_session.h"

#include "model_file.h"
#include "potential.h"
#include "potential_evaluator.h"
#include "precision.h"

#include <torch/torch.h>

#include <utility>

namespace otf {

std::string canonical_precision_name(const std::string &text)
{
  return to_string(parse_precision(text));
}

std::string model_bytes_from_path(const std::string &path)
{
  return save_model_to_bytes(*load_model_or_spec(path));
}

struct ModelSession::Impl {
  Impl(std::shared_ptr<Potential> loaded, EvaluatorOptions options) :
      potential(std::move(loaded)), evaluator(potential, options)
  {
  }
  std::shared_ptr<Potential> potential;
  PotentialEvaluator evaluator;
};

ModelSession::ModelSession(const std::string &model_bytes, const std::string &precision,
                           int64_t chunk_size)
{
  EvaluatorOptions options;
  options.precision = parse_precision(precision);
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

std::shared_ptr<Potential> ModelSession::potential() const
{
  return impl_->potential;
}

}    // namespace otf
