// The global vector fix otf/train publishes to thermo output (f_ID[1] ... f_ID[N]): one named
// table, read by the fix's compute_vector, listed in the same order and with the same names in
// doc/fix_otf_train.md (a unit test compares the two) and looked up by name in the tests. No
// LibTorch or LAMMPS types.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace otf {

class OnTheFlyTrainer;
struct TrainerSettings;

// How many elements the vector has.
std::size_t trainer_output_count();
// The name of element `index` (0-based, as compute_vector numbers them); "" beyond the end.
std::string_view trainer_output_name(std::size_t index);
// The 0-based index of the element called `name`, if there is one.
std::optional<std::size_t> trainer_output_index(std::string_view name);
// The value of element `index` (0-based) of `trainer`, or, before the trainer exists (null), what
// the settings alone say (the learning rate; 0 for the rest). 0 beyond the end.
double trainer_output(const OnTheFlyTrainer* trainer, const TrainerSettings& settings,
                      std::size_t index);

}  // namespace otf
