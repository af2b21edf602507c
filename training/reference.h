// The reference a model learns from: "label this configuration: energy, forces, virial". A
// LAMMPS pair style is one implementation (lammps-plugin/pair_style_reference.h); an ab initio
// code behind a socket is another kind. The on-the-fly trainer decides when to call it; the MD
// code only supplies the configuration. No LibTorch or LAMMPS types.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace otf {

// The current configuration, as one MD rank holds it (borrowed for the call). Owned atoms only:
// a reference that needs the whole frame gathers it over the ranks.
struct ReferenceConfiguration {
  int64_t step = 0;
  int num_local = 0;
  const double* positions = nullptr;  // [num_local][3]
  const int* types = nullptr;         // [num_local], the MD code's 1-based types
  const int64_t* ids = nullptr;       // [num_local], global atom ids (1-based)
  int64_t atoms_in_frame = 0;         // over all ranks
  // The periodic cell: its edge vectors as rows (a, b, c) and its lower corner, in MD units.
  std::array<double, 9> cell{};
  std::array<double, 3> origin{};
};

// The reference's answer, in the MD code's units.
struct ReferenceLabel {
  double energy = 0.0;                // of the whole frame
  std::array<double, 6> virial{};     // of the whole frame: xx yy zz xy xz yz (energy units)
  std::vector<double> owned_forces;   // [num_local][3]: on this rank's owned atoms
};

// Label: the label is all that is wanted, the MD forces of the step stay as they are.
// Drive: the reference drives this step, its forces become the MD forces as well.
enum class ReferenceUse { Label, Drive };

// The reference could not label the configuration, its own retries spent. Thrown alike on every
// rank (the call is collective). The trainer skips the label while the model drives and stops the
// run while the reference drives (docs/design.md §12).
class ReferenceFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A label asked for while the MD goes on (fix otf/train label_wait no): the reference computes it
// elsewhere (an ab initio code in its own process) and the trainer collects the answer later.
class PendingLabel {
 public:
  virtual ~PendingLabel() = default;
  // Whether the answer is there, without waiting; rank 0's answer counts (the caller broadcasts
  // it). Not collective.
  virtual bool ready() = 0;
  // Collective over the MD ranks: waits for the answer. Rank 0 gets the whole frame's forces
  // ([atoms][3], atom-id order as training/frame_gather.h gathers the configuration that was
  // given to start_label), every rank the energy and virial, the other ranks no forces. Throws
  // ReferenceFailure on every rank when the reference could not label it.
  virtual ReferenceLabel wait() = 0;
};

class Reference {
 public:
  virtual ~Reference() = default;
  // For log lines, e.g. "pair_style sw".
  virtual std::string description() const = 0;
  // Collective over the MD ranks. Errors are reported by the implementation in the MD code's
  // way (a LAMMPS error) or thrown as std::exception with a message for the user.
  virtual ReferenceLabel label(const ReferenceConfiguration& configuration, ReferenceUse use) = 0;
  // Collective over the MD ranks: starts labelling the configuration in the background and
  // returns at once (the configuration may change afterwards). Null: this reference labels only
  // while its caller waits (a LAMMPS pair style computes in the MD's own processes), and the
  // caller uses label().
  virtual std::unique_ptr<PendingLabel> start_label(const ReferenceConfiguration& /*configuration*/) {
    return nullptr;
  }
  // Calls that failed and were retried or given up, for the thermo output.
  virtual int64_t failed_attempts() const { return 0; }
};

}  // namespace otf
