#include "mpi_communicator.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace otf {
namespace {

// Element counts of one MPI call are ints; larger buffers go in segments of at most this many
// elements per rank (a 1 GiB float32 scratch at most).
constexpr int64_t kMaxElementsPerRankPerCall = int64_t{1} << 28;
constexpr int64_t kMaxBytesPerBroadcastCall = int64_t{1} << 30;
// Each tensor's bytes start at a multiple of this in the broadcast buffer, so that the unpacking
// kernels read aligned elements (torch allocates CPU buffers 64-byte aligned).
constexpr int64_t kBroadcastAlignmentBytes = 64;

void check_mpi(int error_code, const char* call) {
  if (error_code == MPI_SUCCESS) {
    return;
  }
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int length = 0;
  MPI_Error_string(error_code, text.data(), &length);
  throw std::runtime_error(std::string("MpiCommunicator: ") + call +
                           " failed: " + std::string(text.data(), static_cast<size_t>(length)));
}

std::string dtype_name(c10::ScalarType dtype) { return c10::toString(dtype); }

// The dtype of the buffer a tensor of `dtype` is reduced in; nullopt if it cannot be reduced.
// bfloat16 and float16 have no MPI datatype and go to the float32 buffer (summed in float32,
// rounded once when unpacked).
std::optional<c10::ScalarType> reduction_buffer_dtype(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Float:
    case c10::ScalarType::BFloat16:
    case c10::ScalarType::Half:
      return c10::ScalarType::Float;
    case c10::ScalarType::Double:
      return c10::ScalarType::Double;
    case c10::ScalarType::Int:
      return c10::ScalarType::Int;
    case c10::ScalarType::Long:
      return c10::ScalarType::Long;
    default:
      return std::nullopt;
  }
}

// One buffer per dtype, in this fixed order on every rank.
constexpr std::array<c10::ScalarType, 4> kReductionBufferDtypes = {
    c10::ScalarType::Float, c10::ScalarType::Double, c10::ScalarType::Int, c10::ScalarType::Long};

MPI_Datatype mpi_datatype_of(c10::ScalarType buffer_dtype) {
  switch (buffer_dtype) {
    case c10::ScalarType::Float:
      return MPI_FLOAT;
    case c10::ScalarType::Double:
      return MPI_DOUBLE;
    case c10::ScalarType::Int:
      return MPI_INT32_T;
    case c10::ScalarType::Long:
      return MPI_INT64_T;
    default:
      throw std::logic_error("MpiCommunicator: no MPI datatype for buffer dtype " +
                             dtype_name(buffer_dtype));
  }
}

// Why a tensor cannot take part, or an empty string if it can.
std::string tensor_problem(const torch::Tensor& tensor, size_t index, bool needs_reducible_dtype) {
  std::ostringstream problem;
  problem << "tensor " << index;
  if (!tensor.defined()) {
    problem << " is undefined";
  } else if (tensor.layout() != torch::kStrided) {
    problem << " has layout " << tensor.layout() << "; only dense (strided) tensors are supported";
  } else if (!tensor.device().is_cpu() && !tensor.device().is_cuda()) {
    problem << " is on device " << tensor.device()
            << "; the communicator stages CPU and CUDA tensors through host memory only";
  } else if (needs_reducible_dtype && !reduction_buffer_dtype(tensor.scalar_type())) {
    problem << " has dtype " << dtype_name(tensor.scalar_type())
            << "; supported: Float, Double, BFloat16, Half, Int, Long";
  } else {
    return {};
  }
  return problem.str();
}

// FNV-1a (http://www.isthe.com/chongo/tech/comp/fnv/), enough to tell lists apart.
class Fnv1aHash {
 public:
  void add(int64_t value) {
    const auto bits = static_cast<uint64_t>(value);
    for (int byte = 0; byte < 8; ++byte) {
      hash_ ^= (bits >> (8 * byte)) & 0xffu;
      hash_ *= 0x100000001b3u;
    }
  }
  int64_t value() const {
    int64_t as_signed = 0;
    std::memcpy(&as_signed, &hash_, sizeof as_signed);
    return as_signed;
  }

 private:
  uint64_t hash_ = 0xcbf29ce484222325u;
};

// Runs on every rank before any data moves: a rank whose list is invalid, or different from the
// others', makes every rank throw the same way, so no rank is left waiting in a collective.
// `root` is part of the agreement for broadcast (-1 otherwise).
void agree_on_tensor_list(MPI_Comm communicator, int size,
                          const std::vector<torch::Tensor>& tensors, bool needs_reducible_dtype,
                          int root, const char* function_name) {
  std::string local_problem;
  if (root >= size) {
    local_problem = "root " + std::to_string(root) + " is not a rank of a communicator of size " +
                    std::to_string(size);
  } else if (root < -1) {
    local_problem = "root " + std::to_string(root) + " is negative";
  }
  Fnv1aHash layout;
  layout.add(static_cast<int64_t>(tensors.size()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const torch::Tensor& tensor = tensors[i];
    if (local_problem.empty()) {
      local_problem = tensor_problem(tensor, i, needs_reducible_dtype);
    }
    if (!tensor.defined()) {
      layout.add(-1);
      continue;
    }
    layout.add(static_cast<int64_t>(tensor.scalar_type()));
    layout.add(tensor.dim());
    for (const int64_t extent : tensor.sizes()) {
      layout.add(extent);
    }
  }

  // The maximum of v and of ~v (= -v - 1, decreasing in v) gives the maximum and the minimum of
  // every value in one MPI_Allreduce. Maxima are exact and order-free, so all ranks agree.
  constexpr int kValues = 4;
  std::array<int64_t, 2 * kValues> extremes{};
  const std::array<int64_t, kValues> local_values = {
      local_problem.empty() ? 0 : 1, static_cast<int64_t>(tensors.size()), layout.value(), root};
  for (int i = 0; i < kValues; ++i) {
    extremes[i] = local_values[i];
    extremes[kValues + i] = ~local_values[i];
  }
  check_mpi(
      MPI_Allreduce(MPI_IN_PLACE, extremes.data(), 2 * kValues, MPI_INT64_T, MPI_MAX, communicator),
      "MPI_Allreduce (tensor list agreement)");
  const auto maximum = [&](int i) { return extremes[i]; };
  const auto minimum = [&](int i) { return ~extremes[kValues + i]; };

  const std::string prefix = std::string("MpiCommunicator::") + function_name + ": ";
  if (maximum(0) != 0) {
    throw std::invalid_argument(
        prefix +
        (local_problem.empty()
             ? "another rank passed an argument it cannot use (see that rank's message)"
             : local_problem) +
        "; nothing was communicated");
  }
  if (maximum(1) != minimum(1) || maximum(2) != minimum(2) || maximum(3) != minimum(3)) {
    std::ostringstream message;
    message << prefix << "the ranks passed different arguments (";
    if (maximum(1) != minimum(1)) {
      message << "between " << minimum(1) << " and " << maximum(1) << " tensors";
    } else if (maximum(2) != minimum(2)) {
      message << "tensor shapes or dtypes differ";
    } else {
      message << "roots between " << minimum(3) << " and " << maximum(3);
    }
    message << "); every rank must pass the same list in the same order; nothing was communicated";
    throw std::invalid_argument(message.str());
  }
}

// Element-wise reduction of `buffer` (count elements, a multiple of size) over the ranks, in
// place, with bitwise identical results everywhere: MPI_Reduce_scatter_block leaves the reduced
// value of each element on exactly one rank, and MPI_Allgather copies those bytes to the others.
// MPI_Allreduce promises no such thing: the standard lets an implementation change the order of
// evaluation of a reduction, which changes floating-point sums (MPI-3.1 section 5.9.1), and the
// recursive-doubling and ring algorithms of Open MPI's coll/tuned have every rank combine the
// partial sums of an element itself, each in its own order. This is the reduce-scatter +
// allgather decomposition of Rabenseifner's allreduce (Thakur, Rabenseifner and Gropp, IJHPCA
// 19(1), 2005), so it moves about as many bytes as MPI_Allreduce's large-message algorithms.
// The order in which an owner combines the contributions is MPI's; with two ranks it cannot
// matter (a + b == b + a in IEEE arithmetic); with more, results are identical on every rank but
// need not be reproducible across MPI configurations.
void reduce_identically_on_every_rank(void* buffer, int64_t count, MPI_Datatype datatype,
                                      int64_t element_bytes, MPI_Op operation,
                                      MPI_Comm communicator, int size) {
  const int64_t elements_per_rank = count / size;
  if (elements_per_rank == 0) {
    return;
  }
  std::vector<unsigned char> owned_part(
      static_cast<size_t>(std::min(elements_per_rank, kMaxElementsPerRankPerCall) * element_bytes));
  auto* bytes = static_cast<unsigned char*>(buffer);
  for (int64_t done_per_rank = 0; done_per_rank < elements_per_rank;) {
    const int64_t segment_per_rank =
        std::min(kMaxElementsPerRankPerCall, elements_per_rank - done_per_rank);
    // The segment covers [done * size, (done + segment) * size); rank r owns its r-th slice.
    unsigned char* segment = bytes + done_per_rank * size * element_bytes;
    const int count_per_rank = static_cast<int>(segment_per_rank);
    check_mpi(MPI_Reduce_scatter_block(segment, owned_part.data(), count_per_rank, datatype,
                                       operation, communicator),
              "MPI_Reduce_scatter_block");
    check_mpi(MPI_Allgather(owned_part.data(), count_per_rank, datatype, segment, count_per_rank,
                            datatype, communicator),
              "MPI_Allgather");
    done_per_rank += segment_per_rank;
  }
}

int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm communicator) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized) {
    throw std::logic_error(
        "MpiCommunicator: MPI is not initialised; call MPI_Init before creating it (LAMMPS has "
        "done so before any fix or pair style exists)");
  }
  if (finalized) {
    throw std::logic_error("MpiCommunicator: MPI is already finalised");
  }
  if (communicator == MPI_COMM_NULL) {
    throw std::invalid_argument("MpiCommunicator: the communicator is MPI_COMM_NULL");
  }
  int is_intercommunicator = 0;
  check_mpi(MPI_Comm_test_inter(communicator, &is_intercommunicator), "MPI_Comm_test_inter");
  if (is_intercommunicator) {
    throw std::invalid_argument(
        "MpiCommunicator: an intercommunicator was given; pass an intracommunicator such as "
        "LAMMPS' world");
  }
  check_mpi(MPI_Comm_dup(communicator, &communicator_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_rank(communicator_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(communicator_, &size_), "MPI_Comm_size");
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && communicator_ != MPI_COMM_NULL) {
    MPI_Comm_free(&communicator_);
  }
}

void MpiCommunicator::all_reduce_sum(const std::vector<torch::Tensor>& tensors) {
  all_reduce(tensors, Reduction::kSum, "all_reduce_sum");
}

void MpiCommunicator::all_reduce_max(const std::vector<torch::Tensor>& tensors) {
  all_reduce(tensors, Reduction::kMax, "all_reduce_max");
}

void MpiCommunicator::all_reduce(const std::vector<torch::Tensor>& tensors, Reduction reduction,
                                 const char* function_name) {
  agree_on_tensor_list(communicator_, size_, tensors, /*needs_reducible_dtype=*/true,
                       /*root=*/-1, function_name);
  // Tensors may be leaves that require grad (parameters); the reduction is not part of a graph.
  torch::NoGradGuard no_grad;
  const MPI_Op operation = reduction == Reduction::kSum ? MPI_SUM : MPI_MAX;
  for (const c10::ScalarType buffer_dtype : kReductionBufferDtypes) {
    std::vector<const torch::Tensor*> members;
    int64_t elements = 0;
    for (const torch::Tensor& tensor : tensors) {
      if (reduction_buffer_dtype(tensor.scalar_type()) == buffer_dtype) {
        members.push_back(&tensor);
        elements += tensor.numel();
      }
    }
    if (members.empty()) {
      continue;
    }
    // Padded to a multiple of the rank count for MPI_Reduce_scatter_block; the padding is zero
    // and its reduced values are thrown away.
    torch::Tensor flat =
        torch::empty({round_up(elements, size_)}, torch::TensorOptions().dtype(buffer_dtype));
    int64_t offset = 0;
    for (const torch::Tensor* tensor : members) {
      // copy_ converts bf16/fp16 to float32 exactly and reads any strides.
      flat.narrow(0, offset, tensor->numel()).view(tensor->sizes()).copy_(*tensor);
      offset += tensor->numel();
    }
    flat.narrow(0, offset, flat.numel() - offset).zero_();

    reduce_identically_on_every_rank(flat.data_ptr(), flat.numel(), mpi_datatype_of(buffer_dtype),
                                     static_cast<int64_t>(flat.element_size()), operation,
                                     communicator_, size_);

    offset = 0;
    for (const torch::Tensor* tensor : members) {
      // The one rounding of a bf16/fp16 result (round to nearest even, c10::BFloat16/c10::Half).
      tensor->copy_(flat.narrow(0, offset, tensor->numel()).view(tensor->sizes()));
      offset += tensor->numel();
    }
  }
}

void MpiCommunicator::broadcast(const std::vector<torch::Tensor>& tensors, int root) {
  agree_on_tensor_list(communicator_, size_, tensors, /*needs_reducible_dtype=*/false, root,
                       "broadcast");
  torch::NoGradGuard no_grad;
  // All tensors' bytes in one buffer, whatever their dtypes: one collective for a whole model.
  std::vector<int64_t> offsets;
  offsets.reserve(tensors.size());
  int64_t total_bytes = 0;
  for (const torch::Tensor& tensor : tensors) {
    total_bytes = round_up(total_bytes, kBroadcastAlignmentBytes);
    offsets.push_back(total_bytes);
    total_bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());
  }
  torch::Tensor bytes = torch::empty({total_bytes}, torch::TensorOptions().dtype(torch::kByte));
  const auto as_tensor_in_buffer = [&](size_t i) {
    return torch::from_blob(bytes.data_ptr<uint8_t>() + offsets[i], tensors[i].sizes(),
                            torch::TensorOptions().dtype(tensors[i].scalar_type()));
  };
  if (rank_ == root) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      as_tensor_in_buffer(i).copy_(tensors[i]);
    }
  }
  for (int64_t done = 0; done < total_bytes; done += kMaxBytesPerBroadcastCall) {
    const int64_t chunk = std::min(kMaxBytesPerBroadcastCall, total_bytes - done);
    check_mpi(MPI_Bcast(bytes.data_ptr<uint8_t>() + done, static_cast<int>(chunk), MPI_BYTE, root,
                        communicator_),
              "MPI_Bcast");
  }
  if (rank_ != root) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      tensors[i].copy_(as_tensor_in_buffer(i));
    }
  }
}

double MpiCommunicator::all_reduce_sum(double value) {
  // Every rank contributes at index 0 of a rank-count-long vector; rank 0 owns that element.
  std::vector<double> contributions(static_cast<size_t>(size_), 0.0);
  contributions[0] = value;
  reduce_identically_on_every_rank(contributions.data(), size_, MPI_DOUBLE, sizeof(double), MPI_SUM,
                                   communicator_, size_);
  return contributions[0];
}

std::vector<torch::Tensor> MpiCommunicator::exchange_rows(const std::vector<torch::Tensor>& send) {
  if (static_cast<int>(send.size()) != size_) {
    throw std::invalid_argument("MpiCommunicator::exchange_rows: one tensor per rank expected (" +
                                std::to_string(size_) + " ranks, got " + std::to_string(send.size()) +
                                ")");
  }
  const torch::Tensor& own = send[static_cast<size_t>(rank_)];
  if (!own.defined() || own.dim() != 2) {
    throw std::invalid_argument("MpiCommunicator::exchange_rows: [rows, width] tensors expected");
  }
  const int64_t width = own.size(1);
  const c10::ScalarType dtype = own.scalar_type();
  const torch::Device device = own.device();
  // Per destination: rows, width, dtype (what the receiver allocates and checks).
  std::vector<int64_t> outgoing(3 * static_cast<size_t>(size_)), incoming(outgoing.size());
  for (int r = 0; r < size_; ++r) {
    const torch::Tensor& rows = send[static_cast<size_t>(r)];
    if (!rows.defined() || rows.dim() != 2 || rows.size(1) != width || rows.scalar_type() != dtype) {
      throw std::invalid_argument("MpiCommunicator::exchange_rows: the tensor for rank " +
                                  std::to_string(r) + " is not [rows, " + std::to_string(width) +
                                  "] " + dtype_name(dtype) + " like this rank's own");
    }
    outgoing[3 * static_cast<size_t>(r)] = rows.size(0);
    outgoing[3 * static_cast<size_t>(r) + 1] = width;
    outgoing[3 * static_cast<size_t>(r) + 2] = static_cast<int64_t>(dtype);
  }
  check_mpi(MPI_Alltoall(outgoing.data(), 3, MPI_INT64_T, incoming.data(), 3, MPI_INT64_T,
                         communicator_),
            "MPI_Alltoall (exchange_rows counts)");
  for (int r = 0; r < size_; ++r) {
    if (incoming[3 * static_cast<size_t>(r) + 1] != width ||
        incoming[3 * static_cast<size_t>(r) + 2] != static_cast<int64_t>(dtype)) {
      throw std::invalid_argument("MpiCommunicator::exchange_rows: rank " + std::to_string(r) +
                                  " sends rows of another width or dtype than rank " +
                                  std::to_string(rank_) + "'s " + dtype_name(dtype) + " [rows, " +
                                  std::to_string(width) + "]");
    }
  }
  const auto host = torch::TensorOptions().dtype(dtype).device(torch::kCPU);
  const int64_t row_bytes = width * static_cast<int64_t>(c10::elementSize(dtype));
  const auto checked_bytes = [&](int64_t rows) {
    const int64_t bytes = rows * row_bytes;
    if (bytes > std::numeric_limits<int>::max()) {
      throw std::invalid_argument("MpiCommunicator::exchange_rows: a message of " +
                                  std::to_string(bytes) + " bytes is larger than one MPI call takes");
    }
    return static_cast<int>(bytes);
  };
  constexpr int kTag = 7321;
  std::vector<torch::Tensor> staged(static_cast<size_t>(size_)), received(staged.size());
  std::vector<MPI_Request> requests;
  for (int r = 0; r < size_; ++r) {
    const int64_t rows = incoming[3 * static_cast<size_t>(r)];
    if (r == rank_) {
      received[static_cast<size_t>(r)] = own.to(torch::kCPU).contiguous().clone();
      continue;
    }
    received[static_cast<size_t>(r)] = torch::empty({rows, width}, host);
    if (rows == 0) continue;
    requests.emplace_back();
    check_mpi(MPI_Irecv(received[static_cast<size_t>(r)].data_ptr(), checked_bytes(rows), MPI_BYTE, r,
                        kTag, communicator_, &requests.back()),
              "MPI_Irecv (exchange_rows)");
  }
  for (int r = 0; r < size_; ++r) {
    const torch::Tensor& rows = send[static_cast<size_t>(r)];
    if (r == rank_ || rows.size(0) == 0) continue;
    staged[static_cast<size_t>(r)] = rows.to(torch::kCPU).contiguous();
    requests.emplace_back();
    check_mpi(MPI_Isend(staged[static_cast<size_t>(r)].data_ptr(), checked_bytes(rows.size(0)),
                        MPI_BYTE, r, kTag, communicator_, &requests.back()),
              "MPI_Isend (exchange_rows)");
  }
  check_mpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall (exchange_rows)");
  for (torch::Tensor& rows : received) rows = rows.to(device);
  return received;
}

}  // namespace otf
