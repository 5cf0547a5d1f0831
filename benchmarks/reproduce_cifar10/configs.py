"""The published ResNet18 / CIFAR-10 table (OneFlow's QAT results, seed 000) and, for each of
its rows, the qflow-train flags that train that configuration."""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Config:
    name: str          # directory under OUT and the --configs name
    label: str         # the row's text in the table
    published: float   # test accuracy in %
    qat_flags: tuple = field(default_factory=tuple)  # empty: the float model

    @property
    def is_qat(self):
        return bool(self.qat_flags)


def _qat(scheme, formula, per_channel):
    flags = ("--qat", "--bits", "8", "--scheme", scheme, "--formula", formula)
    return flags + (("--per-channel",) if per_channel else ())


CONFIGS = (
    Config("float", "float", 95.62),
    Config("symmetric-google-per-layer", "8-bit QAT symmetric/google per-layer", 95.19,
           _qat("symmetric", "google", False)),
    Config("symmetric-google-per-channel", "8-bit QAT symmetric/google per-channel", 95.24,
           _qat("symmetric", "google", True)),
    Config("affine-google-per-layer", "8-bit QAT affine/google per-layer", 95.32, _qat("affine", "google", False)),
    Config("affine-google-per-channel", "8-bit QAT affine/google per-channel", 95.30, _qat("affine", "google", True)),
    Config("symmetric-cambricon-per-layer", "8-bit QAT symmetric/cambricon per-layer", 95.19,
           _qat("symmetric", "cambricon", False)),
)

NAMES = tuple(c.name for c in CONFIGS)


def select(spec):
    """The configurations named by --configs ("all" or comma-separated names), in table order."""
    if spec == "all":
        return list(CONFIGS)
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [w for w in wanted if w not in NAMES]
    if unknown or not wanted:
        raise ValueError("--configs: unknown configuration(s) {} (all, or a comma-separated list of: {})".format(
            ", ".join(unknown) or "(none given)", ", ".join(NAMES)))
    return [c for c in CONFIGS if c.name in wanted]
