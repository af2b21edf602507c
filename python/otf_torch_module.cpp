// The Python module `otf_torch._otf_torch`: the trained model outside LAMMPS, evaluated by the
// same C++ (model file, evaluator, committee) that pair_style otf runs. Only conversions between
// NumPy/Python objects and the C++ types live here; otf_torch/__init__.py adds the Python side.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "build_info.h"
#include "configuration_evaluator.h"
#include "model_file.h"
#include "precision.h"

namespace py = pybind11;

namespace otf {
namespace {

using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;

std::string lower_trimmed(const std::string& text) {
  std::string out;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (out.rfind("torch.", 0) == 0) out.erase(0, 6);
  return out;
}

// The evaluator's options for a requested precision. A float64 model runs float64 only; a float32
// model runs float32 or, inside the autocast region, bfloat16 or float16. "float64" is accepted
// here (not by the engine's parser, whose set is the training precisions) to name a float64
// model's own precision.
EvaluatorOptions evaluator_options(const Potential& potential,
                                   const std::optional<std::string>& precision,
                                   int64_t chunk_size) {
  EvaluatorOptions options;
  options.chunk_size = chunk_size;
  const bool float64_model = potential.dtype() == torch::kFloat64;
  if (precision) {
    const std::string word = lower_trimmed(*precision);
    if (word == "float64" || word == "fp64" || word == "double") {
      if (!float64_model)
        throw std::invalid_argument("precision '" + *precision +
                                    "' needs a float64 model; this model's parameters are float32 "
                                    "(accepted: float32, bfloat16, float16)");
    } else {
      options.precision = parse_precision(*precision);
    }
  }
  check_evaluator_options(&potential, options);
  return options;
}

py::array_t<double> to_numpy(const std::vector<double>& values, std::vector<py::ssize_t> shape) {
  py::array_t<double> array(shape);
  std::copy(values.begin(), values.end(), array.mutable_data());
  return array;
}

class PythonModel {
 public:
  PythonModel(const std::string& path, const std::optional<std::string>& precision,
              int64_t chunk_size) {
    std::shared_ptr<Potential> potential = load_model_or_spec(path);
    const EvaluatorOptions options = evaluator_options(*potential, precision, chunk_size);
    evaluator_ = std::make_unique<ConfigurationEvaluator>(std::move(potential), options);
  }

  const ModelSpec& spec() const { return evaluator_->potential().spec(); }

  std::string precision() const {
    if (evaluator_->potential().dtype() == torch::kFloat64) return "float64";
    return to_string(evaluator_->options().precision);
  }

  std::string spec_json() const { return to_json(spec()).dump(); }
  std::string training_json() const {
    return evaluator_->potential().training_metadata().to_json().dump();
  }
  bool energy_shifts_fitted() const { return evaluator_->potential().energy_shifts_fitted(); }

  void save(const std::string& path) const { save_model(evaluator_->potential(), path); }

  py::dict evaluate(const DoubleArray& positions, const std::vector<std::string>& symbols,
                    const std::optional<DoubleArray>& cell, bool force_uncertainty) {
    Configuration configuration = configuration_from(positions, symbols, cell);
    ConfigurationResults results;
    {
      // The evaluator reuses its buffers: one evaluation at a time per model. LibTorch runs
      // without the GIL so that Python threads may work meanwhile.
      py::gil_scoped_release release;
      const std::lock_guard<std::mutex> lock(mutex_);
      results = evaluator_->evaluate(configuration, force_uncertainty);
    }
    const auto atoms = static_cast<py::ssize_t>(configuration.num_atoms());
    py::dict out;
    out["energy"] = results.energy;
    out["forces"] = to_numpy(results.forces, {atoms, 3});
    out["virial"] = to_numpy({results.virial.begin(), results.virial.end()}, {6});
    out["energies"] = to_numpy(results.atom_energies, {atoms});
    out["atom_virials"] = to_numpy(results.atom_virials, {atoms, 6});
    out["energy_uncertainties"] = to_numpy(results.energy_uncertainties, {atoms});
    if (force_uncertainty)
      out["force_uncertainties"] = to_numpy(results.force_uncertainties, {atoms});
    return out;
  }

 private:
  Configuration configuration_from(const DoubleArray& positions,
                                   const std::vector<std::string>& symbols,
                                   const std::optional<DoubleArray>& cell) const {
    if (positions.ndim() != 2 || positions.shape(1) != 3)
      throw py::value_error(
          "positions must be an array of shape (atoms, 3); got " +
          std::to_string(positions.ndim()) + " dimension(s)" +
          (positions.ndim() == 2 ? " of width " + std::to_string(positions.shape(1)) : ""));
    const auto atoms = static_cast<size_t>(positions.shape(0));
    if (symbols.size() != atoms)
      throw py::value_error(std::to_string(atoms) + " positions but " +
                            std::to_string(symbols.size()) + " element symbols");
    Configuration configuration;
    configuration.positions.assign(positions.data(), positions.data() + 3 * atoms);
    configuration.species.reserve(atoms);
    for (size_t i = 0; i < atoms; ++i) {
      const int64_t index = spec().species_index(symbols[i]);
      if (index < 0) {
        std::string known;
        for (const auto& element : spec().elements) known += (known.empty() ? "" : ", ") + element;
        throw py::value_error("element '" + symbols[i] + "' (atom " + std::to_string(i) +
                              ") is not in this model; its elements: " + known);
      }
      configuration.species.push_back(static_cast<int>(index));
    }
    if (cell) {
      if (cell->ndim() != 2 || cell->shape(0) != 3 || cell->shape(1) != 3)
        throw py::value_error("cell must be a 3 x 3 array (rows a, b, c) or None");
      std::array<std::array<double, 3>, 3> rows{};
      for (int d = 0; d < 3; ++d)
        for (int k = 0; k < 3; ++k) rows[d][k] = cell->at(d, k);
      configuration.cell = rows;
    }
    return configuration;
  }

  std::unique_ptr<ConfigurationEvaluator> evaluator_;
  std::mutex mutex_;
};

}  // namespace
}  // namespace otf

PYBIND11_MODULE(_otf_torch, module) {
  using otf::PythonModel;
  module.doc() = "OTF-Torch models evaluated by the C++ that pair_style otf runs";
  module.attr("__version__") = otf::build_info().otf_version;
  module.attr("torch_version") = otf::build_info().torch_version;
  module.def(
      "set_num_threads",
      [](int threads) {
        if (threads < 1)
          throw py::value_error("threads must be >= 1, got " + std::to_string(threads));
        torch::set_num_threads(threads);
      },
      py::arg("threads"), "LibTorch's intra-op threads (process-wide).");
  module.def("get_num_threads", [] { return torch::get_num_threads(); });

  py::class_<PythonModel>(module, "Model", R"doc(
A model file (or a JSON spec: a fresh untrained model) loaded for evaluation.

precision: None (the model's own: float64 or float32), or for a float32 model one of float32,
bfloat16, float16 (aliases fp32, bf16, fp16, torch.float16...); chunk_size: centre atoms per chunk.
)doc")
      .def(py::init<const std::string&, const std::optional<std::string>&, int64_t>(),
           py::arg("path"), py::arg("precision") = py::none(), py::arg("chunk_size") = 2048)
      .def_property_readonly("elements", [](const PythonModel& m) { return m.spec().elements; })
      .def_property_readonly("cutoff", [](const PythonModel& m) { return m.spec().cutoff; })
      .def_property_readonly("units", [](const PythonModel& m) { return m.spec().units; })
      .def_property_readonly("committee_size",
                             [](const PythonModel& m) { return m.spec().committee_size; })
      .def_property_readonly("dtype", [](const PythonModel& m) { return m.spec().dtype; })
      .def_property_readonly("architecture",
                             [](const PythonModel& m) { return m.spec().architecture; })
      .def_property_readonly("precision", &PythonModel::precision)
      .def_property_readonly("energy_shifts_fitted", &PythonModel::energy_shifts_fitted)
      .def("spec_json", &PythonModel::spec_json, "The model's spec (every hyperparameter), JSON.")
      .def("training_json", &PythonModel::training_json,
           "Training history (optimizer_steps, frames_seen, precision), JSON.")
      .def("save", &PythonModel::save, py::arg("path"), "Writes the model file atomically.")
      .def("evaluate", &PythonModel::evaluate, py::arg("positions"), py::arg("symbols"),
           py::arg("cell") = py::none(), py::arg("force_uncertainty") = false, R"doc(
Energy, forces, virial (xx yy zz xy xz yz, sum r f), per-atom energies and virials, per-atom
energy uncertainties and (force_uncertainty=True) per-atom force uncertainties, in the model's
units. positions: (atoms, 3); symbols: element per atom; cell: rows a, b, c of a cell periodic in
all three directions, or None for no periodicity.
)doc");
}
