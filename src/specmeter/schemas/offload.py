"""How much of each model a launched server placed on its GPUs, as the server itself logged it.

An engine that fits its offload to free GPU memory (llama-server's automatic fit) can place fewer layers on the
GPU for the second server on a device than for the first: its speed then measures a split model, not the GPU.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class LayerOffload(BaseModel):
    """One model's layers on the GPU, out of the layers it has (llama.cpp counts the output layer as one)."""

    offloaded: int = Field(ge=0)
    layers: int = Field(ge=0)

    @property
    def full(self) -> bool:
        return self.offloaded >= self.layers


class GpuOffload(BaseModel):
    """The GPUs a server could use and how many layers of its target and draft model it placed on them."""

    devices: list[str] = Field(description="The GPUs the server could use, as it lists them; empty: none (a CPU "
                               "build or a machine without a GPU), so every layer ran on the CPU.")
    target: LayerOffload | None = Field(default=None, description="None: the server's log does not say (no GPU: "
                                        "nothing was offloaded).")
    draft: LayerOffload | None = Field(default=None, description="None: no draft model loaded, or the log does "
                                       "not say.")
