"""Where a plan's launched servers run on one node: the GPUs found, and per server its GPUs and memory share.

Stored in the plan (summary.json), so a resume relaunches every server where it ran, and the report says where
each side of a comparison ran and with how much memory.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# cpu: no GPU found, nothing placed. disjoint: every server on GPUs of its own. shared: servers share GPUs, each
# with the same memory fraction. sequential: one server at a time (interleave off, asked for or fallen back to).
Mode = Literal["cpu", "disjoint", "shared", "sequential"]


class Gpu(BaseModel):
    """One GPU a run may use. `id` is what CUDA_VISIBLE_DEVICES takes (an index, or a UUID/MIG id as given)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str | None = None
    memory_mib: int | None = Field(default=None, description="Total memory (nvidia-smi memory.total).")


class ServerPlacement(BaseModel):
    """One launched server: the GPUs it sees, the share of each GPU's memory it may take, its tensor parallel."""

    model_config = ConfigDict(extra="forbid")

    server: str
    gpus: list[str] = Field(description="GPU ids, in the order CUDA_VISIBLE_DEVICES lists them to the server.")
    tensor_parallel_size: int = Field(ge=1, description="GPUs the server is split over (the larger of the target's "
                                      "and the draft's tensor parallel size).")
    memory_fraction: float | None = Field(default=None, description="Share of each GPU's memory (None: the "
                                          "engine's default, the server being alone on its GPUs).")
    weights_gib: float | None = Field(default=None, description="Target and draft weights on disk per GPU (None: "
                                      "not local, not known).")


class Placement(BaseModel):
    """Where a plan's launched servers run; attached servers run elsewhere and are not listed."""

    model_config = ConfigDict(extra="forbid")

    mode: Mode
    source: str = Field(description="Where the GPUs came from: --gpus, the sweep file's gpus, "
                        "CUDA_VISIBLE_DEVICES, nvidia-smi, or none found.")
    gpus: list[Gpu] = Field(default_factory=list)
    servers: list[ServerPlacement] = Field(default_factory=list)
    servers_per_gpu: int = Field(default=1, description="The most servers up together on one GPU.")
    warning: str | None = Field(default=None, description="Why interleaving fell back to one server at a time, and "
                                "what it would need.")

    def server(self, server_id: str) -> ServerPlacement | None:
        return next((s for s in self.servers if s.server == server_id), None)
