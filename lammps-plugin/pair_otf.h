/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: pair_style otf, an OTF-Torch ML potential in LAMMPS. A thin
   shell: it parses the style's arguments, hands LAMMPS' arrays to the model
   (otf::ModelSession, which keeps LibTorch out of this header) and reports
   errors. Energies, forces and virials are double precision here whatever
   precision the model runs in.
------------------------------------------------------------------------- */

#ifndef LMP_PAIR_OTF_H
#define LMP_PAIR_OTF_H

#include "pair.h"

#include "md_system_adaptor.h"
#include "pair_style_keywords.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace otf {
class ModelSession;
struct EvaluationTotals;
}

namespace LAMMPS_NS {

class PairOTF : public Pair {
 public:
  explicit PairOTF(class LAMMPS *);
  ~PairOTF() override;

  void compute(int, int) override;
  void settings(int, char **) override;
  void coeff(int, char **) override;
  void init_style() override;
  double init_one(int, int) override;
  int pack_reverse_comm(int, int, double *) override;
  void unpack_reverse_comm(int, int *, double *) override;
  double memory_usage() override;

  // Standard deviation over the committee of each atom's energy, from the last force
  // evaluation ([nlocal + nghost], zero for atoms that are not centres of this style).
  const double *atom_energy_uncertainty() const { return atom_energy_uncertainty_; }
  // The timestep of the last force evaluation (-1 before the first) and its owned atom count.
  bigint last_evaluation_step() const { return last_evaluation_step_; }
  int last_evaluation_nlocal() const { return last_evaluation_nlocal_; }
  // The model's species index of every atom type ([ntypes + 1], -1 for NULL types).
  const std::vector<int> &type_species() const { return type_species_; }
  // The model being evaluated; a training fix updates its weights in place.
  otf::ModelSession &model_session() { return *session_; }
  const std::string &model_path() const { return model_path_; }

 protected:
  void allocate();
  void grow_atom_arrays();
  void check_units();
  // Evaluates the model on the list's centres (the one MD-to-model adaptor turns LAMMPS' arrays
  // into the model's input): adds forces ([nall][3]) and, when not null, per-atom energies and
  // virials ([nall], [nall][6]) into the given arrays, and the totals into eng_vdwl and virial.
  // Stops this rank with a LAMMPS error if it fails.
  void evaluate_listed_centres(const otf::MdAtoms &atoms, const otf::MdNeighborList &neighbors,
                               double *forces, double *atom_energy, double *atom_virial);
  // Runs one model evaluation when there are centres: a failure stops this rank with a LAMMPS
  // error naming the step; the totals go into eng_vdwl and virial. Records the evaluated step.
  void evaluate_and_tally(bool has_centers, const std::function<otf::EvaluationTotals()> &evaluation);
  // Runs `body` on every rank; if it throws on any rank, every rank stops with error->all
  // carrying the message of the lowest rank that failed (no rank is left in a collective).
  template <typename Body> void on_all_ranks_or_error(const std::string &what, Body &&body);

  std::unique_ptr<otf::ModelSession> session_;
  std::string model_path_;
  std::vector<int> type_species_;    // [ntypes + 1]: the model's species of each type, -1 for NULL

  // Per-atom work array, sized atom->nmax.
  int nmax_ = 0;
  double *atom_energy_uncertainty_ = nullptr;
  otf::MdSystemAdaptor adaptor_;

  bool kokkos_variant_ = false;    // set by PairOTFKokkos
  // The style's name in messages: otf, or otf/kk for the Kokkos variant.
  const char *style_label() const { return kokkos_variant_ ? "otf/kk" : "otf"; }
  // otf/kk's `resident` keyword: evaluate with tensors over the views where they live (AUTO: on
  // GPU execution spaces only).
  otf::ResidentEvaluation resident_ = otf::ResidentEvaluation::Auto;
  bigint last_evaluation_step_ = -1;
  int last_evaluation_nlocal_ = 0;
  bool blas_checked_ = false;      // the BLAS kernel warning is given once per pair style
};

}    // namespace LAMMPS_NS

#endif
