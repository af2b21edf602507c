// GoogleTest main for the training layer's tests: the training session and trainer are collective
// over an MPI communicator, here MPI_COMM_WORLD of a single process. Listing the tests (CTest's
// discovery) needs no MPI: skipping MPI_Init there keeps Open MPI's never-freed start-up
// allocations out of the sanitizer build's discovery step (tests/CMakeLists.txt).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::strcmp(argv[i], "--gtest_list_tests") == 0;
  if (!listing) MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  if (!listing) MPI_Finalize();
  return result;
}
