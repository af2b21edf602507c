#include "pair_moments.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include "radial_basis.h"

namespace otf {
namespace {

struct Monomial {
  int x, y, z;
  double multinomial;
};

// Degree by degree; the order is part of the model (descriptor features follow it).
constexpr std::array<Monomial, 20> kMonomials = {{{0, 0, 0, 1},
                                                  {1, 0, 0, 1}, {0, 1, 0, 1}, {0, 0, 1, 1},
                                                  {2, 0, 0, 1}, {0, 2, 0, 1}, {0, 0, 2, 1},
                                                  {1, 1, 0, 2}, {1, 0, 1, 2}, {0, 1, 1, 2},
                                                  {3, 0, 0, 1}, {0, 3, 0, 1}, {0, 0, 3, 1},
                                                  {2, 1, 0, 3}, {2, 0, 1, 3}, {1, 2, 0, 3},
                                                  {0, 2, 1, 3}, {1, 0, 2, 3}, {0, 1, 2, 3},
                                                  {1, 1, 1, 6}}};
constexpr std::array<int64_t, 5> kFirstOfDegree = {0, 1, 4, 10, 20};
constexpr int64_t kMaxRadial = 32;

void check_shape(const PairMomentsShape& shape) {
  if (shape.max_degree < 0 || shape.max_degree > 3) throw std::invalid_argument("pair moments: max_degree must be 0..3");
  if (shape.radial_functions < 1 || shape.radial_functions > kMaxRadial) {
    throw std::invalid_argument("pair moments: radial_functions must be 1..32");
  }
}

// phi_k(r) and d phi_k / dr for k < count at r < cutoff: T_k(2x - 1) f(x), x = r / cutoff.
template <typename Real>
void radial_values(Real r, Real cutoff, int64_t count, Real* phi, Real* dphi) {
  const Real x = r / cutoff;
  const Real x2 = x * x;
  const Real envelope = Real(1) - x2 * x * (Real(10) + x * (Real(-15) + Real(6) * x));
  const Real denvelope = -Real(30) * x2 * (Real(1) - x) * (Real(1) - x) / cutoff;
  const Real y = Real(2) * x - Real(1);
  const Real dy = Real(2) / cutoff;
  Real t_prev = 1, t = y, dt_prev = 0, dt = 1;  // T_0, T_1 and their y-derivatives
  for (int64_t k = 0; k < count; ++k) {
    Real value, derivative;
    if (k == 0) {
      value = 1;
      derivative = 0;
    } else if (k == 1) {
      value = y;
      derivative = 1;
    } else {
      const Real next = Real(2) * y * t - t_prev;
      const Real dnext = Real(2) * t + Real(2) * y * dt - dt_prev;
      t_prev = t;
      t = next;
      dt_prev = dt;
      dt = dnext;
      value = t;
      derivative = dt;
    }
    phi[k] = value * envelope;
    dphi[k] = derivative * dy * envelope + value * denvelope;
  }
}

// b_m(u) for m < count, and (when gradients != nullptr) d b_m / d u_{x,y,z}.
template <typename Real>
void monomial_values(const Real* u, int64_t count, const Real* weights, Real* values, Real (*gradients)[3]) {
  Real powers[3][4];
  for (int d = 0; d < 3; ++d) {
    powers[d][0] = 1;
    for (int e = 1; e < 4; ++e) powers[d][e] = powers[d][e - 1] * u[d];
  }
  for (int64_t m = 0; m < count; ++m) {
    const Monomial& mono = kMonomials[static_cast<std::size_t>(m)];
    const int e[3] = {mono.x, mono.y, mono.z};
    values[m] = weights[m] * powers[0][e[0]] * powers[1][e[1]] * powers[2][e[2]];
    if (gradients == nullptr) continue;
    for (int d = 0; d < 3; ++d) {
      if (e[d] == 0) {
        gradients[m][d] = 0;
        continue;
      }
      Real g = weights[m] * static_cast<Real>(e[d]);
      for (int o = 0; o < 3; ++o) g *= powers[o][o == d ? e[o] - 1 : e[o]];
      gradients[m][d] = g;
    }
  }
}

template <typename Real>
std::array<Real, 20> monomial_weights() {
  std::array<Real, 20> weights{};
  for (std::size_t m = 0; m < kMonomials.size(); ++m) weights[m] = static_cast<Real>(std::sqrt(kMonomials[m].multinomial));
  return weights;
}

// Calls visit(c, k, r, u, s) for every pair (centre c, slot k) within the cutoff, centres split
// over LibTorch's intra-op threads; padding rows are skipped.
template <typename Real, typename Visit>
void for_each_pair(const Real* vectors, const int64_t* species, int64_t centers, int64_t width,
                   const PairMomentsShape& shape, Visit&& visit) {
  const Real cutoff = static_cast<Real>(shape.cutoff);
  at::parallel_for(0, centers, 16, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      for (int64_t k = 0; k < width; ++k) {
        const Real* v = vectors + 3 * (c * width + k);
        const Real r = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        const int64_t s = species[c * width + k];
        if (!(r < cutoff) || s < 0 || s >= shape.num_species) continue;  // padding
        const Real u[3] = {v[0] / r, v[1] / r, v[2] / r};
        visit(c, k, r, u, s);
      }
    }
  });
}

template <typename Real>
void fused_forward(const Real* vectors, const int64_t* species, int64_t centers, int64_t width,
                   const PairMomentsShape& shape, Real* moments) {
  const int64_t radial = shape.radial_functions;
  const int64_t count = monomial_count(shape.max_degree);
  const int64_t channels = shape.num_species * radial;
  const auto weights = monomial_weights<Real>();
  const Real cutoff = static_cast<Real>(shape.cutoff);
  std::fill(moments, moments + centers * channels * count, Real(0));
  for_each_pair(vectors, species, centers, width, shape,
                [&](int64_t c, int64_t, Real r, const Real* u, int64_t s) {
                  Real phi[kMaxRadial], dphi[kMaxRadial], b[20];
                  radial_values(r, cutoff, radial, phi, dphi);
                  monomial_values<Real>(u, count, weights.data(), b, nullptr);
                  Real* block = moments + c * channels * count + s * radial * count;
                  for (int64_t q = 0; q < radial; ++q) {
                    for (int64_t m = 0; m < count; ++m) block[q * count + m] += phi[q] * b[m];
                  }
                });
}

template <typename Real>
void fused_backward(const Real* vectors, const int64_t* species, const Real* grad_moments, int64_t centers,
                    int64_t width, const PairMomentsShape& shape, Real* grad_vectors) {
  const int64_t radial = shape.radial_functions;
  const int64_t count = monomial_count(shape.max_degree);
  const int64_t channels = shape.num_species * radial;
  const auto weights = monomial_weights<Real>();
  const Real cutoff = static_cast<Real>(shape.cutoff);
  std::fill(grad_vectors, grad_vectors + centers * width * 3, Real(0));  // padding rows stay 0
  for_each_pair(vectors, species, centers, width, shape,
                [&](int64_t c, int64_t k, Real r, const Real* u, int64_t s) {
                  Real phi[kMaxRadial], dphi[kMaxRadial], b[20], db[20][3];
                  radial_values(r, cutoff, radial, phi, dphi);
                  monomial_values<Real>(u, count, weights.data(), b, db);
                  const Real* block = grad_moments + c * channels * count + s * radial * count;
                  // dE/dr = sum_q (sum_m G_qm b_m) phi'_q;  dE/du = sum_m (sum_q G_qm phi_q) db_m/du.
                  Real radial_part = 0;
                  Real angular[3] = {0, 0, 0};
                  Real weighted[20] = {0};
                  for (int64_t q = 0; q < radial; ++q) {
                    Real gb = 0;
                    for (int64_t m = 0; m < count; ++m) {
                      gb += block[q * count + m] * b[m];
                      weighted[m] += block[q * count + m] * phi[q];
                    }
                    radial_part += gb * dphi[q];
                  }
                  for (int64_t m = 0; m < count; ++m) {
                    for (int d = 0; d < 3; ++d) angular[d] += weighted[m] * db[m][d];
                  }
                  // u = v / r: d/dv = (I - u u^T) / r applied to dE/du; r = |v|: d/dv = u.
                  Real* out = grad_vectors + 3 * (c * width + k);
                  const Real along = angular[0] * u[0] + angular[1] * u[1] + angular[2] * u[2];
                  for (int d = 0; d < 3; ++d) out[d] = radial_part * u[d] + (angular[d] - along * u[d]) / r;
                });
}

// Every pair's channels, their r-derivatives, monomials and the monomials' gradients with respect
// to the pair vector (through u = v / r: d/dv = (I - u u^T) / r d/du). Outputs zero-filled here;
// padding rows stay 0.
template <typename Real>
void fused_basis(const Real* vectors, const int64_t* species, int64_t centers, int64_t width,
                 const PairMomentsShape& shape, Real* channels, Real* slopes, Real* monomials,
                 Real* monomial_gradients, Real* units) {
  const int64_t radial = shape.radial_functions;
  const int64_t count = monomial_count(shape.max_degree);
  const int64_t channel_count = shape.num_species * radial;
  const auto weights = monomial_weights<Real>();
  const Real cutoff = static_cast<Real>(shape.cutoff);
  const int64_t pairs = centers * width;
  std::fill(channels, channels + pairs * channel_count, Real(0));
  std::fill(slopes, slopes + pairs * channel_count, Real(0));
  std::fill(monomials, monomials + pairs * count, Real(0));
  std::fill(monomial_gradients, monomial_gradients + pairs * count * 3, Real(0));
  std::fill(units, units + pairs * 3, Real(0));
  for_each_pair(vectors, species, centers, width, shape,
                [&](int64_t c, int64_t k, Real r, const Real* u, int64_t s) {
                  const int64_t pair = c * width + k;
                  Real phi[kMaxRadial], dphi[kMaxRadial], db[20][3];
                  radial_values(r, cutoff, radial, phi, dphi);
                  monomial_values<Real>(u, count, weights.data(), monomials + pair * count, db);
                  Real* channel = channels + pair * channel_count + s * radial;
                  Real* slope = slopes + pair * channel_count + s * radial;
                  for (int64_t q = 0; q < radial; ++q) {
                    channel[q] = phi[q];
                    slope[q] = dphi[q];
                  }
                  Real* gradient = monomial_gradients + pair * count * 3;
                  for (int64_t m = 0; m < count; ++m) {
                    const Real along = db[m][0] * u[0] + db[m][1] * u[1] + db[m][2] * u[2];
                    for (int d = 0; d < 3; ++d) gradient[m * 3 + d] = (db[m][d] - along * u[d]) / r;
                  }
                  for (int d = 0; d < 3; ++d) units[pair * 3 + d] = u[d];
                });
}

class PairMomentsFunction : public torch::autograd::Function<PairMomentsFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& vectors,
                               const torch::Tensor& species, int64_t num_species, double cutoff,
                               int64_t radial, int64_t max_degree) {
    const PairMomentsShape shape{num_species, cutoff, radial, max_degree};
    const torch::Tensor v = vectors.contiguous();
    const torch::Tensor s = species.to(torch::kInt64).contiguous();
    const int64_t centers = v.size(0), width = v.size(1);
    torch::Tensor moments = torch::empty({centers, num_species * radial, monomial_count(max_degree)}, v.options());
    AT_DISPATCH_FLOATING_TYPES(v.scalar_type(), "pair_moments_first_order", [&] {
      fused_forward<scalar_t>(v.data_ptr<scalar_t>(), s.data_ptr<int64_t>(), centers, width, shape,
                              moments.data_ptr<scalar_t>());
    });
    ctx->save_for_backward({v, s});
    ctx->saved_data["num_species"] = num_species;
    ctx->saved_data["cutoff"] = cutoff;
    ctx->saved_data["radial"] = radial;
    ctx->saved_data["max_degree"] = max_degree;
    return moments;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& v = saved[0];
    const torch::Tensor& s = saved[1];
    const PairMomentsShape shape{ctx->saved_data["num_species"].toInt(), ctx->saved_data["cutoff"].toDouble(),
                                 ctx->saved_data["radial"].toInt(), ctx->saved_data["max_degree"].toInt()};
    const torch::Tensor g = grad_outputs[0].to(v.scalar_type()).contiguous();
    torch::Tensor grad_vectors = torch::empty_like(v);
    AT_DISPATCH_FLOATING_TYPES(v.scalar_type(), "pair_moments_first_order_backward", [&] {
      fused_backward<scalar_t>(v.data_ptr<scalar_t>(), s.data_ptr<int64_t>(), g.data_ptr<scalar_t>(), v.size(0),
                               v.size(1), shape, grad_vectors.data_ptr<scalar_t>());
    });
    return {grad_vectors, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

int64_t monomial_count(int64_t max_degree) { return kFirstOfDegree.at(static_cast<std::size_t>(max_degree + 1)); }
int64_t monomials_of_degree(int64_t degree) {
  return kFirstOfDegree.at(static_cast<std::size_t>(degree + 1)) - kFirstOfDegree.at(static_cast<std::size_t>(degree));
}
int64_t first_monomial_of_degree(int64_t degree) { return kFirstOfDegree.at(static_cast<std::size_t>(degree)); }

torch::Tensor pair_moments(const torch::Tensor& pair_vectors, const torch::Tensor& neighbor_species,
                           const PairMomentsShape& shape) {
  check_shape(shape);
  const int64_t centers = pair_vectors.size(0), width = pair_vectors.size(1);
  const int64_t radial = shape.radial_functions;
  const torch::Tensor distances = (pair_vectors * pair_vectors).sum(-1).sqrt();  // padding: 2 x cutoff
  const torch::Tensor basis = chebyshev_radial_basis(distances, shape.cutoff, radial);  // [C, K, radial]
  torch::Tensor channels = basis;  // one species: padding rows vanish through the cutoff anyway
  if (shape.num_species > 1) {
    const torch::Tensor one_hot =
        torch::one_hot(neighbor_species, shape.num_species + 1).narrow(-1, 0, shape.num_species).to(basis.scalar_type());
    channels = (one_hot.unsqueeze(-1) * basis.unsqueeze(-2)).reshape({centers, width, shape.num_species * radial});
  }
  const torch::Tensor unit = pair_vectors / distances.unsqueeze(-1);
  const torch::Tensor axes[3] = {unit.select(-1, 0), unit.select(-1, 1), unit.select(-1, 2)};
  std::vector<torch::Tensor> columns;
  const int64_t count = monomial_count(shape.max_degree);
  for (int64_t m = 0; m < count; ++m) {
    const Monomial& mono = kMonomials[static_cast<std::size_t>(m)];
    const int exponents[3] = {mono.x, mono.y, mono.z};
    torch::Tensor column;
    for (int d = 0; d < 3; ++d) {
      for (int e = 0; e < exponents[d]; ++e) column = column.defined() ? column * axes[d] : axes[d];
    }
    column = column.defined() ? column * std::sqrt(mono.multinomial) : torch::ones_like(axes[0]);
    columns.push_back(column);
  }
  const torch::Tensor monomials = torch::stack(columns, -1);  // [C, K, count]
  // The one matrix product over neighbours (autocast runs it in the lower precision).
  return torch::bmm(channels.transpose(1, 2), monomials);
}

torch::Tensor pair_moments_first_order(const torch::Tensor& pair_vectors, const torch::Tensor& neighbor_species,
                                       const PairMomentsShape& shape) {
  check_shape(shape);
  return PairMomentsFunction::apply(pair_vectors, neighbor_species, shape.num_species, shape.cutoff,
                                    shape.radial_functions, shape.max_degree);
}

PairBasis pair_basis(const torch::Tensor& pair_vectors, const torch::Tensor& neighbor_species,
                     const PairMomentsShape& shape) {
  check_shape(shape);
  torch::NoGradGuard no_grad;
  // The loop is host code: on another device the basis is computed on the host and moved back.
  const torch::Device device = pair_vectors.device();
  const torch::Tensor v = pair_vectors.detach().to(torch::kCPU).contiguous();
  const torch::Tensor s = neighbor_species.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t centers = v.size(0), width = v.size(1);
  const int64_t channel_count = shape.num_species * shape.radial_functions;
  const int64_t count = monomial_count(shape.max_degree);
  PairBasis basis;
  basis.channels = torch::empty({centers, width, channel_count}, v.options());
  basis.channel_slopes = torch::empty({centers, width, channel_count}, v.options());
  basis.monomials = torch::empty({centers, width, count}, v.options());
  basis.monomial_gradients = torch::empty({centers, width, count, 3}, v.options());
  basis.units = torch::empty({centers, width, 3}, v.options());
  AT_DISPATCH_FLOATING_TYPES(v.scalar_type(), "pair_basis", [&] {
    fused_basis<scalar_t>(v.data_ptr<scalar_t>(), s.data_ptr<int64_t>(), centers, width, shape,
                          basis.channels.data_ptr<scalar_t>(), basis.channel_slopes.data_ptr<scalar_t>(),
                          basis.monomials.data_ptr<scalar_t>(), basis.monomial_gradients.data_ptr<scalar_t>(),
                          basis.units.data_ptr<scalar_t>());
  });
  if (!device.is_cpu()) {
    for (torch::Tensor* tensor : {&basis.channels, &basis.channel_slopes, &basis.monomials,
                                  &basis.monomial_gradients, &basis.units}) {
      *tensor = tensor->to(device);
    }
  }
  return basis;
}

torch::Tensor moments_from_basis(const PairBasis& basis) {
  return torch::bmm(basis.channels.transpose(1, 2), basis.monomials);
}

torch::Tensor pair_gradients_from_moment_gradients(const PairBasis& basis,
                                                   const torch::Tensor& moment_gradients) {
  if (moment_gradients.dim() != 4 || moment_gradients.size(1) != basis.channels.size(0) ||
      moment_gradients.size(2) != basis.channels.size(2) || moment_gradients.size(3) != basis.monomials.size(2)) {
    throw std::invalid_argument("pair_gradients_from_moment_gradients: expected gradients [H, centres, channels, monomials]");
  }
  const int64_t sets = moment_gradients.size(0), centers = moment_gradients.size(1);
  const int64_t channels = moment_gradients.size(2), count = moment_gradients.size(3);
  const int64_t width = basis.channels.size(1);
  // Centre-major, so that each centre's sets are the rows of one matrix product with its pairs.
  const torch::Tensor by_center =
      moment_gradients.to(basis.channels.scalar_type()).permute({1, 0, 2, 3});  // [C, H, J, N]
  // sum_m G_jm b_m(u_k), then weighted by the channels' slopes: the part along u.
  const torch::Tensor channel_weights =
      torch::bmm(by_center.reshape({centers, sets * channels, count}), basis.monomials.transpose(1, 2))
          .reshape({centers, sets, channels, width});
  const torch::Tensor along = (channel_weights * basis.channel_slopes.transpose(1, 2).unsqueeze(1)).sum(2);
  // sum_j G_jm channel_j(r_k), then through the monomials' gradients: the angular part.
  const torch::Tensor monomial_weights =
      torch::bmm(by_center.transpose(2, 3).reshape({centers, sets * count, channels}),
                 basis.channels.transpose(1, 2))
          .reshape({centers, sets, count, width});
  const torch::Tensor across =
      torch::einsum("chmk,ckmd->chkd", {monomial_weights, basis.monomial_gradients});
  return (along.unsqueeze(-1) * basis.units.unsqueeze(1) + across).permute({1, 0, 2, 3});
}

}  // namespace otf
