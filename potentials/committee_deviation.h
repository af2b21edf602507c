// The committee's uncertainty, in one place: how far the members' predictions of one quantity
// spread around their mean. Every style and the training layer use these two functions, so the
// per-atom energy uncertainty of pair_style otf and compute otf/atom and the force uncertainty of
// fix otf/train's policy are the same formula everywhere (docs/potentials.md, "Uncertainty").
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace otf {

// Members along dim 0, one scalar per item after it ([members, items]): per item
// sqrt(mean_k (v_k - mean_k v)^2), the population standard deviation over the members.
torch::Tensor committee_deviation(const torch::Tensor& member_values);

// Members along dim 0, one vector per item in the last dim ([members, atoms, 3]): per atom
// sqrt(mean_k |F_k - mean_k F|^2), DeePMD-kit's force model deviation.
torch::Tensor committee_vector_deviation(const torch::Tensor& member_vectors);

// A frame's committee summary, gathered over its parts (an MD rank's owned atoms). Each part gives
// sums that add up over the parts (MPI_SUM):
//   [sum of its atoms' squared force spreads, its atom count, member 0's energy, member 1's, ...]
// from its per-atom force spreads (committee_vector_deviation) and its part of each member's
// energy (`member_energies`, [members] or fewer: missing members count 0).
std::vector<double> committee_spread_sums(const double* per_atom_spread, int64_t atoms,
                                          const torch::Tensor& member_energies, int64_t members);

struct CommitteeFrameSpread {
  double mean_square_force_spread = 0.0;  // mean over the frame's atoms of the squared spread
  double mean_energy = 0.0;               // committee mean of the frame energy
  double energy_spread_per_atom = 0.0;    // members' standard deviation of it, per atom
};

// From the parts' summed committee_spread_sums (`totals`, 2 + members values): the energy spread
// is per atom of `atoms_in_frame`, or of the atoms the sums counted when that is not positive.
CommitteeFrameSpread committee_frame_spread(const double* totals, int64_t members,
                                            int64_t atoms_in_frame);

}  // namespace otf
