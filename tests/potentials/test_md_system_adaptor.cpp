// The one MD-to-model adaptor on hand-made LAMMPS-style arrays: the pair styles' listed centres
// (firstneigh row pointers and Kokkos-style contiguous rows give the same view), and the centres of
// a training frame's part (owned atoms with a species, in atom order, with their centre indices).
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "md_system_adaptor.h"

namespace otf {
namespace {

// Four owned atoms on a line 1 apart (x = 0..3), ghosts at x = -1 (image of atom 3),
// x = 4 (image of atom 0) and x = 9 (image of atom 1, far from everything). Type 2 is
// ignored by the model (species -1); atom 2 has type 2.
struct LineSystem {
  std::vector<double> x = {0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0, -1, 0, 0, 4, 0, 0, 9, 0, 0};
  std::vector<int> types = {1, 1, 2, 1, 1, 1, 1};
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

TEST(MdSystemAdaptor, TrainingFrameCentresAreOwnedAtomsWithASpeciesInAtomOrder) {
  LineSystem line;
  // ilist out of atom order: the centres still come in atom order.
  line.ilist = {3, 1, 0, 2, 4, 5, 6};
  MdSystemAdaptor a = adaptor();
  for (bool pointers : {true, false}) {
    const AtomicSystemView view = a.owned_centres(line.atoms(), line.list(false, pointers));
    // Owned atoms 0, 1, 3 (2 is ignored); ghosts are never centres.
    ASSERT_EQ(view.num_centers, 3);
    const std::vector<int> centers(view.centers, view.centers + view.num_centers);
    EXPECT_EQ(centers, (std::vector<int>{0, 1, 3}));
    EXPECT_EQ(view.neighbor_counts[2], 3);
    const std::vector<int> centre_of_owned(a.centre_of_owned(), a.centre_of_owned() + 4);
    EXPECT_EQ(centre_of_owned, (std::vector<int>{0, 1, -1, 2}));
  }
  // An owned atom with a species but no list entry is named.
  LineSystem short_list;
  short_list.ilist = {0, 1, 2, 2};
  try {
    a.owned_centres(short_list.atoms(), short_list.list(false, true));
    FAIL() << "an owned atom without a list entry was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("owned atom 3"), std::string::npos) << e.what();
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
