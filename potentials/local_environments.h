// The input every architecture sees: for a set of centre atoms, the vectors to their neighbours
// within the cutoff (padded to the largest neighbour count), the neighbours' species and the
// centres' species. Strictly local models are functions of this alone, which is what makes them
// evaluable in chunks of centres and exact across MPI ranks.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace otf {

struct LocalEnvironments {
  // [centres, K, 3]: r_j - r_i; padding rows hold a vector longer than the cutoff, so that every
  // cutoff-weighted term of a padding row is exactly 0 together with its derivatives.
  // Member-resolved form [members, centres, K, 3]: member m sees copy m, so one backward pass
  // gives every member's own forces (training each member on forces, not only their mean).
  torch::Tensor pair_vectors;
  // [centres, K] int64: species index of the neighbour; padding rows hold num_species.
  torch::Tensor neighbor_species;
  // [centres] int64.
  torch::Tensor center_species;
  // True when the outputs will be differentiated at most once (MD: forces and virials, no
  // training): an architecture may then use fused kernels without double-backward support.
  bool first_derivatives_only = false;

  int64_t num_centers() const { return center_species.size(0); }
  int64_t max_neighbors() const { return pair_vectors.size(-2); }
  bool member_resolved() const { return pair_vectors.dim() == 4; }
};

// The padding vector for a cutoff: (2 cutoff, 0, 0).
double padding_distance(double cutoff);

}  // namespace otf
