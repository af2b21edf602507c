"""A second peer for bench/bench_training_peer.py: MACE (PyPI's mace-torch) trained on the same
frames as OTF-Torch, one optimizer step timed the way MACE's own training loop runs it.

MACE is a different and much more expressive model (equivariant message passing, two
interactions): this row is not a matched comparison but what a user of a Python MLIP training loop
pays per step on the same atoms, next to ours. Its settings follow MACE's documented small models
(radial cut-off equal to ours, 8 Bessel functions, polynomial envelope 5, max_ell 3, correlation
order 3, two RealAgnosticResidualInteraction blocks, readout MLP 16x0e, SiLU gate); the hidden
irreps are given per row (32x0e is the cheapest invariant MACE, 64x0e+64x1o a small equivariant
one). One model, float32 (MACE's training code has no mixed precision on CPU), the loss is the
mean squared error of energies per atom plus forces, weights 1 and 1, Adam. Forces come from
`compute_force=True` (autograd with the graph kept for the loss), as in MACE's training.

Needs the peer environment with mace-torch: `bench/setup-peer.sh 2.15.0 --with-mace`.
"""
import os
import time

# e3nn 0.4.4 (pinned by mace-torch) loads its own constants file with torch.load, which PyTorch
# 2.6+ refuses by default (weights_only); the file ships inside the installed e3nn package.
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402


def available():
    try:
        import mace  # noqa: F401
        return True
    except ImportError:
        return False


def version():
    from importlib.metadata import version as package_version
    return package_version("mace-torch")


def settings(hidden):
    return (f"MACE hidden {hidden}, r_max = ours, 8 Bessel, envelope p=5, max_ell 3, correlation 3, "
            f"2 interactions, readout MLP 16x0e, SiLU; one model, float32, Adam, loss E/atom + F (weights 1, 1)")


def owned_frame(index, tensors):
    """Positions, labels and cell of the exported frame's owned atoms (one frame)."""
    if tensors["batch.energy"].numel() != 1:
        raise ValueError("the MACE row takes one exported frame (--frames 1)")
    owned = tensors["batch.force_mask"].bool()
    cell = np.array(index["cell"], dtype=np.float64)
    return (tensors["batch.positions"][owned].detach().numpy(), tensors["batch.forces"][owned].detach().numpy(),
            float(tensors["batch.energy"][0]), cell)


def time_step(index, tensors, hidden, repeats):
    """Microseconds per atom of one MACE optimizer step on the exported frame, median of repeats
    (one warm-up step first), and the number of parameters."""
    from e3nn import o3
    from mace import data, modules, tools
    from mace.tools import torch_geometric

    torch.set_default_dtype(torch.float32)
    positions, forces, energy, cell = owned_frame(index, tensors)
    atoms = positions.shape[0]
    cutoff = float(index["spec"]["cutoff"])
    configuration = data.Configuration(
        atomic_numbers=np.full(atoms, 14), positions=positions,
        properties={"energy": energy, "forces": forces}, property_weights={"energy": 1.0, "forces": 1.0},
        cell=cell, pbc=(True, True, True))
    table = tools.AtomicNumberTable([14])
    graph = data.AtomicData.from_config(configuration, z_table=table, cutoff=cutoff)
    batch = next(iter(torch_geometric.dataloader.DataLoader([graph], batch_size=1, shuffle=False))).to_dict()
    block = modules.interaction_classes["RealAgnosticResidualInteractionBlock"]
    model = modules.MACE(
        r_max=cutoff, num_bessel=8, num_polynomial_cutoff=5, max_ell=3, interaction_cls=block,
        interaction_cls_first=block, num_interactions=2, num_elements=1, hidden_irreps=o3.Irreps(hidden),
        MLP_irreps=o3.Irreps("16x0e"), atomic_energies=np.array([energy / atoms]),
        avg_num_neighbors=batch["edge_index"].shape[1] / atoms, atomic_numbers=[14], correlation=3,
        gate=torch.nn.functional.silu)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    times = []
    for r in range(repeats + 1):
        start = time.perf_counter()
        optimizer.zero_grad()
        inputs = dict(batch, positions=batch["positions"].clone())
        out = model(inputs, training=True, compute_force=True)
        loss = (((out["energy"] - batch["energy"]) / atoms) ** 2).mean() + ((out["forces"] - batch["forces"]) ** 2).mean()
        loss.backward()
        optimizer.step()
        if not torch.isfinite(loss):
            raise RuntimeError(f"MACE {hidden}: the loss is not finite")
        if r > 0:
            times.append((time.perf_counter() - start) * 1e6 / atoms)
    return sorted(times)[len(times) // 2], sum(p.numel() for p in model.parameters())
