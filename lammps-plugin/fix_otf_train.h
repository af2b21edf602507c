/* -*- c++ -*- ----------------------------------------------------------
   OTF-Torch: fix otf/train (doc/fix_otf_train.md). Trains the model of
   pair_style otf while the MD runs: every N steps a reference pair style,
   owned by this fix, labels the current configuration (energy, forces,
   virial) without touching the MD forces; the rank's part of the frame goes
   to the replay buffer and the engine takes optimizer steps on batches drawn
   from it, data-parallel over the ranks. A thin shell: the training state is
   otf::TrainingSession, which keeps LibTorch out of this header.
------------------------------------------------------------------------- */

#ifdef FIX_CLASS
// clang-format off
FixStyle(otf/train,FixOTFTrain);
// clang-format on
#else

#ifndef LMP_FIX_OTF_TRAIN_H
#define LMP_FIX_OTF_TRAIN_H

#include "fix.h"

#include <memory>
#include <string>
#include <vector>

namespace otf {
class TrainingSession;
struct TrainingSessionSettings;
struct FramePart;
}    // namespace otf

namespace LAMMPS_NS {

class PairOTF;

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

 private:
  enum class Drive { Reference, Model, Auto };

  void parse_keywords(int narg, char **arg, int first);
  void create_reference();
  void grow_work_arrays();
  // Evaluates the reference on the current configuration: energy and virial of the whole
  // system, owned forces in owned_forces_. f is restored exactly afterwards unless the
  // reference drives (drive_reference_), in which case its forces stay.
  void label_current_configuration(double &energy, double virial[6]);
  // The rank's part of the current configuration (centres, neighbours), without labels.
  void describe_frame(otf::FramePart &frame);
  // Labels the described frame, stores it and trains.
  void label_and_train(otf::FramePart &frame);
  // The committee's force uncertainty on the current configuration: per-atom array and maximum.
  void measure_uncertainty(const otf::FramePart &frame);
  void check_replicas();
  void save_model(const char *why);
  void apply_restart();
  template <typename Body> void on_all_ranks_or_error(const std::string &what, Body &&body);

  // The reference potential: its style, its settings and each pair_coeff line, as given.
  std::string reference_style_;
  std::vector<std::string> reference_settings_;
  std::vector<std::vector<std::string>> reference_coeffs_;
  class Pair *reference_ = nullptr;
  int reference_request_first_ = -1;

  PairOTF *model_pair_ = nullptr;
  class NeighList *list_ = nullptr;
  std::unique_ptr<otf::TrainingSessionSettings> settings_;
  std::unique_ptr<otf::TrainingSession> session_;

  int label_every_ = 10;
  bigint save_every_ = 0;
  std::string save_path_;
  bigint last_labelled_step_ = -1;
  bigint last_saved_step_ = -1;
  bigint reference_calls_ = 0;
  double max_uncertainty_ = 0.0;      // largest force uncertainty at the last measurement
  int replicas_differ_ = 0;
  bool ghost_cutoff_warned_ = false;
  // One rank holds the whole frame: ghost forces are folded onto the atoms they are images of,
  // instead of ghost centres (which need a ghost shell of 2 x cutoff).
  bool fold_images_ = false;
  std::vector<int> force_owner_;

  // Who drives: fixed (reference, model) or auto, where drive_reference_ switches.
  Drive drive_mode_ = Drive::Model;
  bool drive_reference_ = false;    // the reference's forces move the atoms now
  double threshold_force_rmse_ = 0.0;        // auto: validation force RMSE to hand over
  double threshold_uncertainty_ = 0.0;       // auto: uncertainty to hand over; above: label
  double threshold_take_over_ = 0.0;         // auto: above this the reference drives again
  int check_every_ = 0;                      // auto: uncertainty check while the model drives
  bigint last_checked_step_ = -1;
  bigint last_counted_step_ = -1;
  bigint model_driven_steps_ = 0;
  bigint model_phase_reference_calls_ = 0;
  double *force_uncertainty_ = nullptr;      // per-atom array [nmax], migrates with the atoms

  // From read_restart, applied once the training session exists (init()).
  bool restart_pending_ = false;
  std::string restart_session_;
  std::string restart_buffer_;        // this rank's replay buffer part
  int restart_ranks_ = 0;             // ranks of the run that wrote it
  // The model holds the weights the saved step's forces came from; setup() puts the trained ones
  // back after the setup force evaluation (as in the uninterrupted run).
  bool restart_swap_back_ = false;

  // Work arrays, sized atom->nmax.
  int nmax_ = 0;
  double **saved_forces_ = nullptr;
  int *atom_species_ = nullptr;
  std::vector<int> type_species_;    // [ntypes + 1]
  std::vector<int> centers_;
  std::vector<unsigned char> center_counts_;
  std::vector<int> center_neighbor_counts_;
  std::vector<const int *> center_neighbors_;
  std::vector<double> owned_forces_;
};

}    // namespace LAMMPS_NS

#endif
#endif
