// GoogleTest main for the training layer's tests: the training session and trainer are collective
// over an MPI communicator, here MPI_COMM_WORLD of a single process.
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  MPI_Finalize();
  return result;
}
