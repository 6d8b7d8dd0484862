"""The kernels under test, by name. The gate builds every kernel here for every config."""

from tilegate.kernels.flash_fwd import flash_fwd

KERNELS = {
    "flash_fwd": flash_fwd,
}
