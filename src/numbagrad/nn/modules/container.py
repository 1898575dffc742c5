"""torch.nn.modules.container's classes at their torch path (what torch's pickles name)."""

from ..containers import Container, ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: F401

__all__ = ["Container", "ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]
