/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: fix otf/train (doc/fix_otf_train.md). Trains the model of
   pair_style otf while the MD runs. A thin shell: the training layer reads
   its keywords and its otf::OnTheFlyTrainer decides what to label and
   trains; the fix owns the reference, moves data and reports errors.
------------------------------------------------------------------------- */

#ifdef FIX_CLASS
// clang-format off
FixStyle(otf/train,FixOTFTrain);
// clang-format on
#else

#ifndef LMP_FIX_OTF_TRAIN_H
#define LMP_FIX_OTF_TRAIN_H

#include "fix.h"

#include <mpi.h>

#include "md_system_adaptor.h"

#include <memory>
#include <string>
#include <vector>

namespace otf {
class OnTheFlyTrainer;
class Reference;
struct IpiReferenceSettings;
struct TrainerSettings;
}    // namespace otf

namespace LAMMPS_NS {

class PairOTF;
class PairStyleReference;

class FixOTFTrain : public Fix {
 public:
  FixOTFTrain(class LAMMPS *, int, char **);
  ~FixOTFTrain() override;

  int setmask() override;
  void init() override;
  void init_list(int, class NeighList *) override;
  void setup(int) override;
  void post_force(int) override;
  void post_run() override;
  double compute_vector(int) override;
  double memory_usage() override;
  void write_restart(FILE *) override;
  void restart(char *) override;
  void grow_arrays(int) override;
  void copy_arrays(int, int, int) override;
  int pack_exchange(int, double *) override;
  int unpack_exchange(int, double *) override;
  int pack_forward_comm(int, int *, double *, int, int *) override;
  void unpack_forward_comm(int, int, double *) override;

 private:
  class FrameSource;

  int split_pair_style_reference(int narg, char **arg,
                                 std::vector<std::vector<std::string>> &coeff_lines);
  void create_ipi_reference(otf::IpiReferenceSettings ipi);
  void find_model_pair();
  void request_lists_and_ghosts();
  void share_owners();
  void create_trainer();
  void apply_restart();
  template <typename Body> void reporting_training_errors(Body &&body);

  // The settings the training layer read from the keywords (training/trainer_keywords.h).
  std::unique_ptr<otf::TrainerSettings> settings_;
  std::unique_ptr<otf::Reference> reference_;
  PairStyleReference *pair_reference_ = nullptr;    // reference_ when it is a pair style
  // Declared after the reference, which it uses: destroyed first.
  std::unique_ptr<otf::OnTheFlyTrainer> trainer_;
  std::unique_ptr<FrameSource> frame_source_;

  PairOTF *model_pair_ = nullptr;
  class NeighList *list_ = nullptr;
  otf::MdSystemAdaptor adaptor_;
  std::vector<int64_t> ids_;
  // [nlocal + nghost]: the rank owning each atom and its centre index there (FramePart's
  // owner_rank and owner_centre); the ghosts' entries come by forward communication.
  std::vector<int> owner_rank_;
  std::vector<int> owner_centre_;
  bool ghost_cutoff_warned_ = false;
  bool budget_stopped_run_ = false;    // this run was ended for the reference-call budget
  double *force_uncertainty_ = nullptr;    // per-atom array [nmax], migrates with the atoms

  // From read_restart: the fix's data, applied once the trainer exists (init()).
  std::string restart_data_;
  // With several partitions (walkers): world rank 0 of each, by partition (else MPI_COMM_NULL).
  MPI_Comm walker_roots_ = MPI_COMM_NULL;
};

}    // namespace LAMMPS_NS

#endif
#endif
