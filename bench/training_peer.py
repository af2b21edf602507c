"""The matched peer: OTF-Torch's default potential and training step written in plain PyTorch.

Same model as potentials/ (three-body moment descriptor with the Chebyshev radial basis and its
smooth cutoff, per-element standardisation, a committee of MLPs evaluated as batched matrix
products, per-element energy shifts in float64), the same member-resolved loss (every member on
its own energies per atom and forces, mean squared errors, weights 1 and 1) and the same optimizer
(Adam), written the way a PyTorch user writes it: the descriptor is built once from positions that
require grad, and every member's forces are the autograd gradient of its energy (one backward pass
per member, the graph kept for the loss).

It reads what `bench_training_step --export DIR` writes (index.json and tensors.bin), so that both
sides hold the same weights and the same frames. Imported by bench/bench_training_peer.py; needs
only torch.
"""
import json
import math
import time
from pathlib import Path

import torch

# Cartesian monomials of a unit vector, degree by degree, with their multinomial coefficients
# (potentials/pair_moments.cpp lists the same order: the descriptor's features follow it).
MONOMIALS = [(0, 0, 0, 1),
             (1, 0, 0, 1), (0, 1, 0, 1), (0, 0, 1, 1),
             (2, 0, 0, 1), (0, 2, 0, 1), (0, 0, 2, 1), (1, 1, 0, 2), (1, 0, 1, 2), (0, 1, 1, 2),
             (3, 0, 0, 1), (0, 3, 0, 1), (0, 0, 3, 1), (2, 1, 0, 3), (2, 0, 1, 3), (1, 2, 0, 3),
             (0, 2, 1, 3), (1, 0, 2, 3), (0, 1, 2, 3), (1, 1, 1, 6)]
FIRST_OF_DEGREE = [0, 1, 4, 10, 20]


def load_export(folder):
    """The tensors and metadata that bench_training_step --export wrote."""
    folder = Path(folder)
    index = json.loads((folder / "index.json").read_text())
    blob = (folder / "tensors.bin").read_bytes()
    tensors = {}
    for name, meta in index["tensors"].items():
        dtype = torch.float64 if meta["dtype"] == "float64" else torch.int64
        count = math.prod(meta["shape"])
        flat = torch.frombuffer(bytearray(blob[meta["offset"]:meta["offset"] + 8 * count]), dtype=dtype)
        tensors[name] = flat.reshape(meta["shape"]).clone()
    return index, tensors


class Peer(torch.nn.Module):
    """The default potential (one element) with the exported weights, in `dtype`."""

    def __init__(self, index, tensors, dtype):
        super().__init__()
        spec = index["spec"]
        hyper = spec["hyperparameters"]
        if len(spec["elements"]) != 1:
            raise ValueError("the peer covers one element, as the benchmark's Si")
        self.cutoff = float(spec["cutoff"])
        self.radial = int(hyper["radial_functions"])
        self.angular = int(hyper["angular_radial_functions"])
        self.max_degree = int(hyper["max_angular_order"]) if self.angular > 0 else 0
        self.members = int(spec["committee_size"])
        self.activation = {"silu": torch.nn.functional.silu, "tanh": torch.tanh,
                           "softplus": torch.nn.functional.softplus}[hyper["activation"]]
        layers = len(hyper["hidden"]) + 1
        self.weights = torch.nn.ParameterList(
            [torch.nn.Parameter(tensors[f"model.networks.species0_layer{i}_weight"].to(dtype)) for i in range(layers)])
        self.biases = torch.nn.ParameterList(
            [torch.nn.Parameter(tensors[f"model.networks.species0_layer{i}_bias"].to(dtype)) for i in range(layers)])
        self.register_buffer("mean", tensors["model.normalizer.mean"][0].to(dtype))
        self.register_buffer("inverse_scale", tensors["model.normalizer.inverse_scale"][0].to(dtype))
        self.register_buffer("shift", tensors["model.energy_shifts"][0].clone())  # float64
        self.register_buffer("monomial_weights",
                             torch.tensor([math.sqrt(m[3]) for m in MONOMIALS], dtype=dtype))
        pairs = [(a, b) for a in range(self.angular) for b in range(a, self.angular)]
        self.register_buffer("upper", torch.tensor([a * self.angular + b for a, b in pairs], dtype=torch.int64))
        self.dtype = dtype

    def radial_basis(self, r):
        x = torch.clamp_max(r / self.cutoff, 1.0)
        envelope = 1.0 - x * x * x * (10.0 + x * (-15.0 + 6.0 * x))
        y = 2.0 * x - 1.0
        polynomials = [torch.ones_like(y), y]
        for _ in range(2, self.radial):
            polynomials.append(2.0 * y * polynomials[-1] - polynomials[-2])
        return torch.stack(polynomials[:self.radial], -1) * envelope.unsqueeze(-1)

    def descriptor(self, vectors):
        """vectors [C, K, 3] (padding rows beyond the cutoff): features [C, F]."""
        r = vectors.norm(dim=-1)
        basis = self.radial_basis(r)  # [C, K, R]
        u = vectors / r.unsqueeze(-1)
        count = FIRST_OF_DEGREE[self.max_degree + 1]
        columns = [u[..., 0] ** m[0] * u[..., 1] ** m[1] * u[..., 2] ** m[2] for m in MONOMIALS[:count]]
        monomials = torch.stack(columns, -1) * self.monomial_weights[:count]  # [C, K, N]
        moments = torch.bmm(basis.transpose(1, 2), monomials)  # [C, R, N]
        features = [moments[..., 0]]
        angular = moments[:, :self.angular]
        for degree in range(1, self.max_degree + 1):
            block = angular[..., FIRST_OF_DEGREE[degree]:FIRST_OF_DEGREE[degree + 1]]
            gram = torch.bmm(block, block.transpose(1, 2))
            features.append(gram.reshape(gram.shape[0], -1)[:, self.upper])
        return torch.cat(features, -1)

    def member_atomic_energies(self, vectors):
        """[members, C] float64."""
        hidden = ((self.descriptor(vectors) - self.mean) * self.inverse_scale).unsqueeze(0).expand(self.members, -1, -1)
        for layer, (weight, bias) in enumerate(zip(self.weights, self.biases)):
            hidden = torch.baddbmm(bias, hidden, weight)
            if layer + 1 < len(self.weights):
                hidden = self.activation(hidden)
        return hidden.squeeze(-1).double() + self.shift


class Frames:
    """The exported batch: graph, labels, and where forces on periodic images belong."""

    def __init__(self, tensors, dtype):
        self.positions = tensors["batch.positions"]
        self.centers = tensors["batch.centers"]
        self.neighbors = tensors["batch.neighbor_index"]
        self.center_frame = tensors["batch.center_frame"]
        self.force_owner = tensors["batch.force_owner"]
        self.energy = tensors["batch.energy"]
        self.forces = tensors["batch.forces"]
        self.force_mask = tensors["batch.force_mask"].bool()
        self.atoms_per_frame = tensors["batch.atoms_per_frame"].double()
        self.frames = int(self.energy.shape[0])
        self.dtype = dtype

    def pair_vectors(self, positions, cutoff):
        valid = self.neighbors >= 0
        safe = self.neighbors.clamp_min(0)
        vectors = positions[safe] - positions[self.centers].unsqueeze(1)
        padding = torch.tensor([2.0 * cutoff, 0.0, 0.0], dtype=positions.dtype)
        return torch.where(valid.unsqueeze(-1), vectors, padding)


def predict(peer, frames, member_forces, create_graph):
    """Member energies [H, frames] float64, and forces on owned atoms: [H, atoms, 3] per member
    (member_forces True: one autograd pass per member; "batched": one vectorised pass,
    is_grads_batched) or [atoms, 3] of the committee mean (False: one pass)."""
    # detach: in float64 .to() returns the frame's own tensor, which must not start requiring grad.
    positions = frames.positions.to(peer.dtype).detach().requires_grad_(True)
    atomic = peer.member_atomic_energies(frames.pair_vectors(positions, peer.cutoff))
    energy = torch.zeros(peer.members, frames.frames, dtype=torch.float64).index_add(1, frames.center_frame, atomic)
    fold = lambda f: torch.zeros_like(f).index_add(0, frames.force_owner, f)
    if member_forces == "batched":
        # Every member's gradient in one vectorised backward pass (torch.vmap over the cotangents).
        cotangents = torch.eye(peer.members, dtype=atomic.dtype)
        gradient, = torch.autograd.grad(atomic.sum(1), positions, grad_outputs=cotangents,
                                        is_grads_batched=True, create_graph=create_graph)
        return energy, torch.stack([fold(-g) for g in gradient])
    if member_forces:
        forces = []
        for h in range(peer.members):
            gradient, = torch.autograd.grad(atomic[h].sum(), positions, create_graph=create_graph, retain_graph=True)
            forces.append(fold(-gradient))
        return energy, torch.stack(forces)
    gradient, = torch.autograd.grad(atomic.sum() / peer.members, positions, create_graph=create_graph)
    return energy, fold(-gradient)


def member_loss(peer, frames, energy, forces):
    """OTF-Torch's loss for member-resolved predictions: energies per atom (weighted by the atom
    counts) and force components, mean squared errors over every member's copy of the labels."""
    counts = frames.atoms_per_frame.repeat(peer.members)
    target = frames.energy.repeat(peer.members)
    energy_term = (counts * (energy.reshape(-1) / counts - target / counts) ** 2).sum() / counts.sum()
    mask = frames.force_mask
    force_error = forces[:, mask].double() - frames.forces[mask].unsqueeze(0)
    return energy_term + (force_error ** 2).mean()


def autocast_dtype(precision):
    return {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}[precision]


def time_inference(peer, frames, precision, repeats):
    """Microseconds per atom of one energy + committee-mean forces evaluation."""
    lower = autocast_dtype(precision)
    atoms = int(frames.atoms_per_frame.sum())
    times = []
    for r in range(repeats + 1):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=lower or torch.bfloat16, enabled=lower is not None):
            energy, forces = predict(peer, frames, member_forces=False, create_graph=False)
        forces.sum().item()
        if r > 0:
            times.append((time.perf_counter() - start) * 1e6 / atoms)
    return sorted(times)[len(times) // 2]


def time_step(peer, frames, precision, repeats, member_forces=True):
    """Microseconds per atom of the batch for one optimizer step (zero_grad, forward with every
    member's forces in the autocast region, loss, backward, Adam; float16 with a GradScaler).
    member_forces: True (a backward pass per member) or "batched" (predict)."""
    lower = autocast_dtype(precision)
    atoms = int(frames.atoms_per_frame.sum())
    optimizer = torch.optim.Adam(peer.parameters(), lr=1e-3)
    # Only float16 needs loss scaling; torch 1.13 has no CPU GradScaler (nor CPU float16 autocast).
    scaler = torch.amp.GradScaler("cpu") if precision == "float16" else None
    times = []
    for r in range(repeats + 1):
        start = time.perf_counter()
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=lower or torch.bfloat16, enabled=lower is not None):
            energy, forces = predict(peer, frames, member_forces=member_forces, create_graph=True)
            loss = member_loss(peer, frames, energy, forces)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        if r > 0:
            times.append((time.perf_counter() - start) * 1e6 / atoms)
    return sorted(times)[len(times) // 2]


def check_agreement(index, tensors):
    """Largest relative differences of the float64 peer from OTF-Torch's float64 predictions:
    member energies, every member's forces, committee-mean energy and forces."""
    peer = Peer(index, tensors, torch.float64)
    frames = Frames(tensors, torch.float64)
    energy, member_forces = predict(peer, frames, member_forces=True, create_graph=False)
    _, batched_forces = predict(peer, frames, member_forces="batched", create_graph=False)
    _, forces = predict(peer, frames, member_forces=False, create_graph=False)
    relative = lambda a, b: float((a.detach() - b).abs().max() / b.abs().max().clamp_min(1e-300))
    return {
        "member_energy": relative(energy, tensors["expected.member_energy"]),
        "member_forces": relative(member_forces, tensors["expected.member_forces"]),
        "member_forces_batched": relative(batched_forces, tensors["expected.member_forces"]),
        "energy": relative(energy.mean(0), tensors["expected.energy"]),
        "forces": relative(forces, tensors["expected.forces"]),
    }


def profile(peer, frames, precision, what, repeats=5, rows=10):
    """Where the time goes (torch.profiler, CPU): the top operators of `what` ("inference" or
    "step") in `precision`, as text."""
    from torch.profiler import ProfilerActivity, profile as torch_profile
    run = {"inference": time_inference, "step": time_step}[what]
    run(peer, frames, precision, 1)  # warm-up outside the profile
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        run(peer, frames, precision, repeats)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)
