// The one MD-to-model adaptor on hand-made LAMMPS-style arrays: the pair styles' listed centres
// (firstneigh row pointers and Kokkos-style contiguous rows give the same view), the centres of a
// frame split over ranks (owned atoms, then ghosts within the cutoff of one), and a frame held by
// one rank with its ghosts folded onto their atoms by id.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "md_system_adaptor.h"

namespace otf {
namespace {

// Four owned atoms on a line 1 apart (x = 0..3), ghosts at x = -1 (image of atom 3, id 4),
// x = 4 (image of atom 0, id 1) and x = 9 (image of atom 1, id 2, far from everything). Type 2 is
// ignored by the model (species -1); atom 2 has type 2.
struct LineSystem {
  std::vector<double> x = {0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0, -1, 0, 0, 4, 0, 0, 9, 0, 0};
  std::vector<int> types = {1, 1, 2, 1, 1, 1, 1};
  std::vector<int64_t> ids = {1, 2, 3, 4, 4, 1, 2};
  // Full neighbour rows by atom (owned and ghost atoms), padded to 4 columns.
  std::vector<int> rows = {1, 2, 4, 5,  0, 2, 3, 4,  0, 1, 3, 5,  1, 2, 5, 0,
                           0, 1, 3, 0,  0, 2, 3, 0,  0, 0, 0, 0};
  std::vector<int> numneigh = {3, 4, 4, 3, 2, 3, 0};
  std::vector<int> ilist = {0, 1, 2, 3, 4, 5, 6};
  std::vector<const int*> firstneigh;

  LineSystem() {
    for (int i = 0; i < 7; ++i) firstneigh.push_back(rows.data() + 4 * i);
  }
  MdAtoms atoms() const { return MdAtoms{4, 3, x.data(), types.data()}; }
  MdNeighborList list(bool ghost_entries, bool pointers) const {
    MdNeighborList list;
    list.inum = 4;
    list.gnum = ghost_entries ? 3 : 0;
    list.ilist = ilist.data();
    list.numneigh = numneigh.data();
    if (pointers) {
      list.row_pointers = firstneigh.data();
    } else {
      list.rows = rows.data();
      list.row_stride = 4;
    }
    return list;
  }
};

MdSystemAdaptor adaptor() {
  MdSystemAdaptor a;
  a.set_species_of_type({-1, 0, -1});
  return a;
}

TEST(MdSystemAdaptor, ListedCentresAreTheListsEntriesWithTheirRows) {
  const LineSystem line;
  MdSystemAdaptor by_pointer = adaptor(), by_stride = adaptor();
  const AtomicSystemView a = by_pointer.listed_centres(line.atoms(), line.list(false, true));
  const AtomicSystemView b = by_stride.listed_centres(line.atoms(), line.list(false, false));
  for (const AtomicSystemView* view : {&a, &b}) {
    EXPECT_EQ(view->num_atoms, 7);
    EXPECT_EQ(view->num_local, 4);
    EXPECT_EQ(view->positions, line.x.data());
    ASSERT_EQ(view->num_centers, 4);
    for (int n = 0; n < 4; ++n) {
      EXPECT_EQ(view->centers[n], n);
      EXPECT_EQ(view->neighbor_counts[n], line.numneigh[static_cast<std::size_t>(n)]);
      EXPECT_EQ(view->neighbors[n], line.rows.data() + 4 * n);
    }
    EXPECT_EQ(view->species[0], 0);
    EXPECT_EQ(view->species[2], -1);
  }
}

TEST(MdSystemAdaptor, SplitFrameCentresAreOwnedAtomsThenNearbyGhosts) {
  const LineSystem line;
  MdSystemAdaptor a = adaptor();
  const AtomicSystemView view = a.owned_and_nearby_ghost_centres(line.atoms(), line.list(true, true), 1.5);
  // Owned atoms 0, 1, 3 (2 is ignored); ghosts 4 (1 from atom 0) and 5 (1 from atom 3); ghost 6
  // is 5 away from the nearest owned atom.
  ASSERT_EQ(view.num_centers, 5);
  const std::vector<int> centers(view.centers, view.centers + view.num_centers);
  EXPECT_EQ(centers, (std::vector<int>{0, 1, 3, 4, 5}));
  const std::vector<unsigned char> counts(a.center_energy_counts(), a.center_energy_counts() + 5);
  EXPECT_EQ(counts, (std::vector<unsigned char>{1, 1, 1, 0, 0}));
  EXPECT_EQ(view.neighbors[3], line.rows.data() + 4 * 4);
  EXPECT_EQ(view.neighbor_counts[4], 3);
  EXPECT_EQ(a.force_owner(), nullptr);
  // Without ghost entries in the list a ghost centre has no row: named.
  EXPECT_THROW(a.owned_and_nearby_ghost_centres(line.atoms(), line.list(false, true), 1.5),
               std::runtime_error);
}

TEST(MdSystemAdaptor, WholeFrameFoldsGhostsOntoTheirAtomsById) {
  const LineSystem line;
  MdSystemAdaptor a = adaptor();
  const AtomicSystemView view =
      a.owned_centres_folding_images(line.atoms(), line.list(false, true), line.ids.data());
  const std::vector<int> centers(view.centers, view.centers + view.num_centers);
  EXPECT_EQ(centers, (std::vector<int>{0, 1, 3}));
  ASSERT_NE(a.force_owner(), nullptr);
  const std::vector<int> owner(a.force_owner(), a.force_owner() + 7);
  EXPECT_EQ(owner, (std::vector<int>{0, 1, 2, 3, 3, 0, 1}));
  // A later split-frame view does not keep the folding.
  a.owned_and_nearby_ghost_centres(line.atoms(), line.list(true, true), 1.5);
  EXPECT_EQ(a.force_owner(), nullptr);

  std::vector<int64_t> foreign = line.ids;
  foreign[6] = 99;
  try {
    a.owned_centres_folding_images(line.atoms(), line.list(false, true), foreign.data());
    FAIL() << "a ghost with an unknown id was folded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("ID 99"), std::string::npos) << e.what();
  }
}

TEST(MdSystemAdaptor, TypesOutsideTheMapAreNamed) {
  LineSystem line;
  line.types[1] = 5;
  MdSystemAdaptor a = adaptor();
  try {
    a.listed_centres(line.atoms(), line.list(false, true));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has type 5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace otf
