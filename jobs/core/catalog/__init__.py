"""The machine, accelerator, region, limit and price catalog: versioned YAML data next to this file.

Facts live in the data files (each with its source and date); this module only loads and checks
them, so a new machine type or a new price is a data change, not a code change. Loading is cheap
(PyYAML + pydantic) and cached: `vtx validate` uses it on its fast path."""

from __future__ import annotations

import difflib
import logging
import math
import os
import re
from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from jobs.core.safe_yaml import FILE, SAFE_LOADER, YamlInputError, read_yaml_file
from jobs.core.stack import PersistentResourceOutputs, StackOutputs
from jobs.core.user_io import shown_path

CATALOG_DIR = Path(__file__).parent
log = logging.getLogger(__name__)
QUOTA_PREFIX = "aiplatform.googleapis.com/"
DEFAULT_CPU_QUOTA_METRIC = f"{QUOTA_PREFIX}custom_model_training_cpus"
REDUCTION_SERVER_IMAGE = re.compile(
    r"^(us|europe|asia)-docker\.pkg\.dev/vertex-ai-restricted/training/reductionserver(:[\w.-]+)?$"
)
"""Google's Reduction Server images (one per multi-region): the only image that pool may run."""


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Machine(_Data):
    name: str = ""
    family: str
    vcpus: int | None
    """None where Google gives no figure (cloud-tpu): no CPU quota is counted for it."""
    memory_gb: float | None
    builtin: bool = False
    """True when the accelerators come with the machine (A2/A3/A4/G2/TPU): count is fixed."""
    names_accelerator: bool = True
    """False for TPU VM machines, which Google configures with machineType and tpuTopology
    only: a job may leave the accelerator out, and vtx renders none."""
    accelerators: dict[str, tuple[int, ...]] = Field(default_factory=dict)
    tpu_topologies: dict[str, int] = Field(default_factory=dict)
    """TPU VM machines only: the topologies `machineSpec.tpuTopology` may name -> the VMs
    (hosts) of that slice. One replica of the pool is the whole slice."""
    tpu_cores_per_host: int | None = None
    """cloud-tpu only: TPU cores per VM, so that acceleratorCount says how many VMs a Pod is."""
    unconfirmed: str | None = None
    """Why Vertex's taking this machine for custom training is not confirmed: refused."""
    cpu_quota_metric: str = DEFAULT_CPU_QUOTA_METRIC
    boot_disk_types: tuple[str, ...] = ()
    """The boot disk types the machine takes, its default first; empty: every type limits.yaml
    lists, pd-ssd by default (machines that take only Hyperdisk say so)."""
    local_ssd_gib: int | None = None
    """The Local SSD a VM of this machine comes with (GiB), where a source gives it; None: none
    recorded. No v1 field asks for Local SSD in training (`DiskSpec` has the boot disk only)."""

    @property
    def is_tpu(self) -> bool:
        """A TPU machine: a TPU VM with a topology, or cloud-tpu (TPU v2/v3)."""
        return bool(self.tpu_topologies) or self.tpu_cores_per_host is not None

    def hosts(self, topology: str | None, accelerator_count: int | None) -> int:
        """The VMs one replica of this machine is: a TPU slice's hosts (its topology's, or for
        cloud-tpu its cores over the cores per host), else 1. Unknown topologies count 1 (the
        rules report them)."""
        if self.tpu_topologies:
            return self.tpu_topologies.get(topology or "", 1)
        if self.tpu_cores_per_host and accelerator_count:
            return max(1, accelerator_count // self.tpu_cores_per_host)
        return 1


class Accelerator(_Data):
    name: str = ""
    kind: Literal["gpu", "tpu"]
    memory_gb: float
    quota_key: str | None = None
    """`<gpu>` in custom_model_training_[preemptible_]nvidia_<gpu>_gpus."""
    quota_metric: str | None = None
    preemptible_quota_metric: str | None = None
    quota_id: str | None = None
    preemptible_quota_id: str | None = None
    flex_start: bool = False
    """True for the GPUs a FLEX_START (Dynamic Workload Scheduler) job may request."""
    in_v1_api: bool = True
    """False for a chip the v1 AcceleratorType enum has no value for (TPU v6e): a job names
    its machine only."""
    peak_bf16_tflops: float | None = None
    """Dense bf16 peak per unit (TPU chips: Google's Cloud TPU pages); None: not read."""

    def metric(self, preemptible: bool) -> str:
        """The Vertex quota metric this accelerator draws on (Spot/FLEX_START: preemptible)."""
        explicit = self.preemptible_quota_metric if preemptible else self.quota_metric
        if explicit:
            return explicit
        kind = "preemptible_nvidia" if preemptible else "nvidia"
        return f"{QUOTA_PREFIX}custom_model_training_{kind}_{self.quota_key}_gpus"

    def cloud_quota_id(self, preemptible: bool) -> str | None:
        """The Cloud Quotas id a ``QuotaPreference`` names for this accelerator's metric.

        UNCONFIRMED: Google does not document the ids of Vertex GPU quotas. By default they are
        derived from the metric with Cloud Quotas' usual convention (``..._nvidia_a100_80gb_gpus``
        -> ``CustomModelTrainingNvidiaA10080gbGpusPerProjectPerRegion``); an entry's
        ``quota_id``/``preemptible_quota_id`` in accelerators.yaml, or a stack's per-request
        ``quota_id``, overrides it once `gcloud quotas info list` shows the real one. None when
        there is neither an explicit id nor a GPU quota key to derive it from."""
        explicit = self.preemptible_quota_id if preemptible else self.quota_id
        if explicit or self.quota_key is None:
            return explicit
        words = ["custom", "model", "training", *(["preemptible"] if preemptible else [])]
        words += ["nvidia", *self.quota_key.split("_"), "gpus", "per", "project", "per", "region"]
        return "".join(word.capitalize() for word in words)


class Region(_Data):
    name: str = ""
    families: tuple[str, ...]
    accelerators: tuple[str, ...]
    tpu_pods: tuple[str, ...] = ()
    """The TPUs (v2, v3) whose Pods are offered for training here."""
    reduction_server_image: str | None = None
    """None where the catalog knows no GPU (a Reduction Server serves GPU pools only)."""
    tpus_only_known: bool = False
    """The catalog lists this region only for the TPUs Google's locations page gives it for
    training: its GPUs and other machine families are not recorded, so they are unknown there,
    not "not offered"."""

    def tpu_names(self, cat: Catalog) -> list[str]:
        """The TPUs offered here, as the rules name them."""
        known = cat.accelerators
        return [a for a in self.accelerators if a in known and known[a].kind == "tpu"]


class Range(_Data):
    min: int
    max: int
    default: int | None = None


class Limits(_Data):
    as_of: str
    source: str
    display_name_max_chars: int
    env_vars_max: int
    env_name_max_chars: int
    boot_disk_size_gb: Range
    boot_disk_types: tuple[str, ...]
    timeout_s: Range
    max_wait_s: Range
    flex_start_timeout_max_s: int
    labels_max: int
    label_max_chars: int
    label_key_pattern: str
    label_value_pattern: str
    replica_restarts_max: int
    job_retries_max: int
    machines_max: int
    study_trials_max: int
    parameter_id_pattern: str


Basis = Literal["verified", "derived", "catalog"]
"""How far to trust a figure: read from Google's page, computed from such a figure (each price
file's header says more), or read from a billing catalog's SKU by `vtx prices refresh` (the figure
names its SKU and fetch time)."""
RECALLED = (
    "basis 'recalled' is not accepted: a recalled figure has no source anyone can check; delete "
    "the entry (its price is then unknown) or give a figure read from a source (basis verified "
    "or derived)"
)
PRICES_DIR_ENV = "VTX_PRICES_DIR"
MAX_USD_PER_H = 1000.0
"""The most one machine, accelerator, vCPU or GiB may cost per hour in a table. Vertex's dearest
list figures are tens of dollars an hour (an H100 at $11.27, "Billing catalog" in
docs/vertex-facts.md; a whole a3-highgpu-8g machine's vCPUs and RAM under $20): a figure past
this is a misread price (a nanos count read as dollars, a cut or garbled file), never a rate
to budget with."""


def rate_problem(usd_per_h: object) -> str | None:
    """Why ``usd_per_h`` cannot be an hourly rate (None when it can): it must be a finite number
    from 0 to MAX_USD_PER_H."""
    if isinstance(usd_per_h, bool) or not isinstance(usd_per_h, int | float):
        return f"{usd_per_h!r} is not a number"
    if not math.isfinite(usd_per_h):
        return f"{usd_per_h} is not a finite number"
    if usd_per_h < 0:
        return f"{usd_per_h:g} is negative"
    if usd_per_h > MAX_USD_PER_H:
        return f"{usd_per_h:g} is over {MAX_USD_PER_H:g} $/h, no list price is (a misread figure)"
    return None


class Price(_Data):
    usd_per_h: float | None = None
    """On-demand $/h; None: no published figure known for this region."""
    basis: Basis | None = None
    spot_usd_per_h: float | None = None
    """Spot $/h as Google publishes it for this SKU; None: not known. Never estimated from the
    on-demand price: Spot discounts differ per SKU and region."""
    spot_basis: Basis | None = None
    note: str | None = None
    sku: str | None = None
    """The billing catalog SKU id behind ``usd_per_h`` (refreshed tables only)."""
    sku_description: str | None = None
    spot_sku: str | None = None
    """The billing catalog SKU id behind ``spot_usd_per_h`` (refreshed tables only)."""
    spot_sku_description: str | None = None
    flex_start_usd_per_h: float | None = None
    """FLEX_START (Dynamic Workload Scheduler) $/h: Compute Engine's DWS SKU plus Vertex's
    management fee SKU (refreshed tables only); None: not known. Never taken from the on-demand
    or Spot figure."""
    flex_start_basis: Basis | None = None
    flex_start_sku: str | None = None
    """The two SKU ids behind ``flex_start_usd_per_h`` ("<Compute Engine>+<Vertex fee>")."""
    flex_start_sku_description: str | None = None
    fetched_at: str | None = None
    """When the SKUs were read (UTC, ISO 8601): refreshed tables only."""

    @field_validator("basis", "spot_basis", "flex_start_basis", mode="before")
    @classmethod
    def _not_recalled(cls, basis: object) -> object:
        # Earlier tables held such figures; say why they go rather than list the allowed words.
        if basis == "recalled":
            raise ValueError(RECALLED)
        return basis

    @field_validator("usd_per_h", "spot_usd_per_h", "flex_start_usd_per_h", mode="before")
    @classmethod
    def _a_rate(cls, usd_per_h: object) -> object:
        # A NaN, an infinity, a negative or an absurd figure would be printed and budgeted with.
        problem = None if usd_per_h is None else rate_problem(usd_per_h)
        if problem:
            raise ValueError(f"not an hourly rate: {problem}")
        return usd_per_h

    @model_validator(mode="after")
    def _figures_have_a_basis(self) -> Price:
        for figure, basis in (
            ("usd_per_h", "basis"),
            ("spot_usd_per_h", "spot_basis"),
            ("flex_start_usd_per_h", "flex_start_basis"),
        ):
            if (getattr(self, figure) is None) != (getattr(self, basis) is None):
                raise ValueError(f"{figure} and {basis} go together: give both or neither")
        return self


HOURS_PER_MONTH = 730
"""The month Google's pricing pages and calculator bill by (365 days x 24 h / 12): a disk SKU's
``GiBy.mo`` figure over this is its GiB-hour rate, as the billing report in docs/vertex-facts.md
("Billing catalog", "Disks") converts it."""


class DiskPrice(_Data):
    """A boot disk type's figure, per GiB and month as its SKU states it (``usageUnit``
    ``GiBy.mo``); `usd_per_gib_h` is that over `HOURS_PER_MONTH`."""

    usd_per_gib_month: float | None = None
    """None: no figure known for this region."""
    basis: Basis | None = None
    note: str | None = None
    sku: str | None = None
    sku_description: str | None = None
    fetched_at: str | None = None

    @field_validator("usd_per_gib_month", mode="before")
    @classmethod
    def _a_rate(cls, usd: object) -> object:
        problem = None if usd is None else rate_problem(usd)
        if problem:
            raise ValueError(f"not a rate per GiB-month: {problem}")
        return usd

    @model_validator(mode="after")
    def _figure_has_a_basis(self) -> DiskPrice:
        if (self.usd_per_gib_month is None) != (self.basis is None):
            raise ValueError("usd_per_gib_month and basis go together: give both or neither")
        return self

    @property
    def usd_per_gib_h(self) -> float | None:
        return None if self.usd_per_gib_month is None else self.usd_per_gib_month / HOURS_PER_MONTH


class PriceTable(_Data):
    name: str
    kind: Literal["training", "serving"] = "training"
    """What the figures price: custom training VMs, or the nodes serving a deployed model
    (online prediction: Vertex lists the two apart, and they differ)."""
    region: str
    currency: str
    as_of: str
    """The date the figures were read (or, for a table without figures, last looked for)."""
    source: str
    spot_source: str | None = None
    """Where the Spot figures come from; None when the table has none."""
    flex_start_source: str | None = None
    """Where the FLEX_START figures come from; None when the table has none."""
    machines: dict[str, Price] = Field(default_factory=dict)
    accelerators: dict[str, Price] = Field(default_factory=dict)
    disks: dict[str, DiskPrice] = Field(default_factory=dict)
    """Boot disk type (pd-ssd, ...) -> its figure; a type not here is unknown."""
    stand_in: bool = False
    """Read from the local platform's billing catalog stand-in: figures for rehearsing on the
    local platform, never Google's. Only a catalog `for_stack` of a local stack prices with it."""


class Catalog(_Data):
    machines: dict[str, Machine]
    accelerators: dict[str, Accelerator]
    regions: dict[str, Region]
    limits: Limits
    price_tables: tuple[PriceTable, ...]
    """Training prices, one table per region."""
    serving_price_tables: tuple[PriceTable, ...] = ()
    """Serving (online prediction) prices, one table per region."""
    serving_machines: dict[str, Machine] = Field(default_factory=dict)
    """The machines online prediction serves on (serving_machines.yaml), apart from
    training's: `for_serving` checks a deployment against them."""
    serving_unconfirmed: tuple[str, ...] = ()
    """The serving machines Google's page was not read for (UNCONFIRMED)."""
    purpose: Literal["training", "serving"] = "training"
    """What ``machines`` are offered for: the rules' messages say it."""
    sources: dict[str, str]
    """Data file name -> 'source (as of date)', printed by `vtx catalog`."""
    stand_in_prices: bool = False
    """Whether the local stand-in's tables may price (a local stack's catalog only)."""
    persistent_resources: dict[str, PersistentResourceOutputs] = Field(default_factory=dict)
    """The stack's persistent resources (`for_stack`): a run's meter prices a job on one as
    its share of the resource's pools (`jobs.pricing.warm_pools.share_of`)."""

    def for_stack(self, stack: StackOutputs | None) -> Catalog:
        """This catalog as it prices jobs of ``stack``: the local platform's stand-in tables
        price a local stack's jobs, and never a real stack's (their figures are not Google's);
        the stack's persistent resources price a job's share of one."""
        local = stack is not None and stack.is_local
        priced = self.with_stand_in_prices() if local else self
        if stack is None or not stack.persistent_resources:
            return priced
        return priced.model_copy(update={"persistent_resources": stack.persistent_resources})

    def with_stand_in_prices(self) -> Catalog:
        """This catalog as the local platform prices its own jobs (a budget's meter): the
        figures `for_stack` gives vtx for the local stack, so both cross a budget alike."""
        return self.model_copy(update={"stand_in_prices": True})

    def for_serving(self) -> Catalog:
        """This catalog with serving's machines in place of training's, so that the machine
        rules (`jobs.custom_jobs.rules.machines`) check a deployed model's node as Vertex's
        prediction service takes it. Regions and accelerators stay the catalog's."""
        return self.model_copy(update={"machines": self.serving_machines, "purpose": "serving"})

    def price_table(self, region: str | None) -> PriceTable | None:
        """The newest table for ``region`` (a refreshed one over the shipped one when it is
        newer); None when there is none. Never another region's table: prices differ per
        region, and a wrong figure is worse than an unknown one."""
        return _newest(t for t in self.price_tables if t.region == region and self._may_use(t))

    def serving_price_table(self, region: str | None) -> PriceTable | None:
        """The newest serving (online prediction) table for ``region``; None when there is
        none. Never a training table nor another region's: Vertex prices the two apart."""
        return _newest(
            t for t in self.serving_price_tables if t.region == region and self._may_use(t)
        )

    def _may_use(self, table: PriceTable) -> bool:
        return self.stand_in_prices or not table.stand_in

    def machines_for(self, accelerator: str) -> list[Machine]:
        return [m for m in self.machines.values() if accelerator in m.accelerators]

    def builtin_accelerator(self, machine_name: str | None) -> tuple[str, int] | None:
        """(type, count) of the accelerators a machine comes with (A2/A3/A4/G2/TPU), else None."""
        machine = self.machines.get(machine_name or "")
        if machine is None or not machine.builtin:
            return None
        (accelerator, counts), *_ = machine.accelerators.items()
        return accelerator, counts[0]

    def replica_accelerators(
        self,
        machine_name: str | None,
        accelerator: str | None,
        count: int | None,
        tpu_topology: str | None,
    ) -> tuple[str | None, int]:
        """The accelerator and its units in one replica of a pool: those it names, else those
        its machine comes with (a G2's L4s, a TPU VM's chips); a TPU slice's chips on all its
        hosts (cloud-tpu's acceleratorCount already counts the whole Pod's cores)."""
        builtin = self.builtin_accelerator(machine_name)
        if accelerator is None:
            if builtin is None:
                return None, 0
            accelerator, count = builtin
        else:
            count = count or (builtin[1] if builtin else 1)
        machine = self.machines.get(machine_name or "")
        if machine is None or not machine.tpu_topologies:
            return accelerator, count
        return accelerator, count * machine.hosts(tpu_topology, count)

    def boot_disk_types(self, machine_name: str | None) -> tuple[str, ...]:
        """The boot disk types a machine takes, its default first."""
        machine = self.machines.get(machine_name or "")
        return (machine.boot_disk_types if machine else ()) or self.limits.boot_disk_types

    def reduction_server_image(self, region: str | None) -> str:
        """Google's Reduction Server image for the region's multi-region (us when unknown)."""
        known = self.regions.get(region or "")
        if known is not None and known.reduction_server_image is not None:
            return known.reduction_server_image
        prefix = (region or "us").split("-")[0]
        prefix = prefix if prefix in ("us", "europe", "asia") else "us"
        return f"{prefix}-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"


def _newest(tables: object) -> PriceTable | None:
    """The table with the latest ``as_of`` (ISO dates compare as strings; a refreshed table's
    date has the day, so it wins over a shipped table of the same month)."""
    found = sorted(tables, key=lambda t: t.as_of)  # type: ignore[attr-defined]
    return found[-1] if found else None


def refreshed_prices_dir() -> Path:
    """Where `vtx prices refresh` writes its tables: ``$VTX_PRICES_DIR``, else
    ``$XDG_DATA_HOME/vtx/prices`` (``~/.local/share/vtx/prices``): the user's data, never the
    repository's."""
    env = os.environ.get(PRICES_DIR_ENV)
    if env:
        return Path(env)
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "vtx" / "prices"


def closest(name: str, choices: object) -> str | None:
    """The most similar known name, for 'did you mean' hints. Case and '-'/'_' do not count
    (``N1-STANDARD-8``, ``nvidia_tesla_t4``), and a short name matches a whole part of a long
    one (``t4`` -> NVIDIA_TESLA_T4)."""
    names = [str(c) for c in choices]  # type: ignore[attr-defined]
    folded = {_fold(n): n for n in names}
    if _fold(name) in folded:
        return folded[_fold(name)]
    parts = [n for n in names if name.lower() in n.lower().replace("-", "_").split("_")]
    if parts:
        return parts[0]
    matches = difflib.get_close_matches(_fold(name), list(folded), n=1, cutoff=0.6)
    return folded[matches[0]] if matches else None


def _fold(name: str) -> str:
    return name.lower().replace("-", "_")


def _read(path: Path) -> dict:
    # The repository's own files, so no user-input limits; libyaml, because PyYAML's own loader
    # spent most of `vtx validate`'s time on these 30-odd files.
    data = yaml.load(path.read_text(), Loader=SAFE_LOADER)
    # `x-...` keys only hold YAML anchors shared by entries.
    return {k: v for k, v in data.items() if not str(k).startswith("x-")}


def _named(entries: dict, model: type[_Data]) -> dict:
    return {
        name: model.model_validate({**fields, "name": name}) for name, fields in entries.items()
    }


def _price_source(table: PriceTable) -> str:
    spot = f"Spot: {table.spot_source}" if table.spot_source else "no Spot figures"
    empty = "" if table.machines or table.accelerators else "; no figures yet: all unknown"
    return f"{table.source} (as of {table.as_of}; {spot}{empty})"


def _serving_machines(serving: dict, training: dict[str, Machine]) -> dict[str, Machine]:
    """Each listed serving machine with its figures: serving_machines.yaml's own entry, or
    machines.yaml's. A machine described in both files, or in neither, is an error: each
    figure has one place."""
    own = _named(serving.get("machines") or {}, Machine)
    listed = [*serving["confirmed"], *serving["unconfirmed"]]
    problems = [
        f"{n}: described in machines.yaml and serving_machines.yaml" for n in own if n in training
    ]
    problems += [f"{n}: described but not listed" for n in own if n not in listed]
    problems += [
        f"{n}: listed but described nowhere" for n in listed if n not in own and n not in training
    ]
    if problems:
        raise ValueError(f"serving_machines.yaml: {'; '.join(problems)}")
    return {name: own.get(name) or training[name] for name in listed}


def load_catalog(directory: Path = CATALOG_DIR) -> Catalog:
    """The shipped catalog in ``directory`` with the refreshed price tables of
    `refreshed_prices_dir()` beside its own (cached until a refreshed table changes). A refreshed
    table that does not load is left out with one warning naming it (`refreshed_tables`)."""
    refreshed = refreshed_prices_dir()
    files = sorted(refreshed.glob("*.yaml")) if refreshed.is_dir() else []
    stamp = tuple((str(p), _stamp(p)) for p in files)
    return _load_catalog(directory, stamp)


def _stamp(path: Path) -> tuple[int, ...]:
    """What changes when a refreshed table does (a dangling link has only its own)."""
    try:
        found = os.stat(path)
    except OSError:
        try:
            found = os.lstat(path)
        except OSError:
            return ()
    return (found.st_mtime_ns, found.st_size, found.st_ino)


def _table(path: Path, fix: str) -> PriceTable:
    """The price table in ``path``; a file that is none is named in one line, with what is wrong
    where (``machines.<name>.basis``) and ``fix``."""
    try:
        return PriceTable.model_validate(_read(path))
    except ValidationError as exc:
        problem = _validation_problem(exc)
    except (ValueError, AttributeError, yaml.YAMLError) as exc:
        problem = str(exc).splitlines()[0]
    raise ValueError(f"{path}: not a price table ({problem}); {fix}") from None


def _validation_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg'].removeprefix('Value error, ')}"


REFRESHED_FIX = "run `vtx prices refresh` again or delete it"


def refreshed_tables(paths: list[Path]) -> tuple[list[PriceTable], list[Path]]:
    """The refreshed tables in ``paths`` that load, and their paths. The folder is the user's
    and anything may be there (an empty, binary, cut or huge file, a FIFO, a device link, a
    directory, a dangling link): each is read as a job template is (a regular file, bounded,
    jobs.core.safe_yaml), and one that is not a price table is left out with one warning
    naming it and the fix: the shipped tables price its region instead, and nothing else in
    the catalog depends on it."""
    found: list[PriceTable] = []
    loaded: list[Path] = []
    for path in paths:
        try:
            document = read_yaml_file(path)
            if not isinstance(document, dict):
                raise ValueError(f"a {type(document).__name__}, not a mapping of a table's fields")
            found.append(PriceTable.model_validate(document))
            loaded.append(path)
        except YamlInputError as exc:
            where = "" if exc.problem.path == FILE else f"{exc.problem.path}: "
            _skipped(path, f"{where}{exc.problem.message}")
        except ValidationError as exc:
            _skipped(path, _validation_problem(exc))
        except ValueError as exc:
            _skipped(path, str(exc).splitlines()[0])
    return found, loaded


def _skipped(path: Path, problem: str) -> None:
    log.warning(
        "%s: not a price table (%s); left out, the shipped tables price its region: %s",
        shown_path(path),
        problem,
        REFRESHED_FIX,
    )


@cache
def _load_catalog(directory: Path, refreshed: tuple[tuple[str, tuple[int, ...]], ...]) -> Catalog:
    machines = _read(directory / "machines.yaml")
    accelerators = _read(directory / "accelerators.yaml")
    regions = _read(directory / "regions.yaml")
    limits = _read(directory / "limits.yaml")
    shipped = sorted((directory / "prices").glob("*.yaml"))
    tables = [_table(p, "correct the file") for p in shipped]
    user_tables, user_paths = refreshed_tables([Path(f) for f, _ in refreshed])
    tables += user_tables
    sources = {
        name: f"{doc['source']} (as of {doc['as_of']})"
        for name, doc in [
            ("machines.yaml", machines),
            ("accelerators.yaml", accelerators),
            ("regions.yaml", regions),
            ("limits.yaml", limits),
        ]
    }
    # Refreshed tables are named by their path: they are the user's files, not the repository's.
    names = [f"prices/{p.name}" for p in shipped] + [str(p) for p in user_paths]
    sources.update({name: _price_source(t) for name, t in zip(names, tables, strict=True)})
    serving = _read(directory / "serving_machines.yaml")
    sources["serving_machines.yaml"] = f"{serving['source']} (as of {serving['as_of']})"
    training_machines = _named(machines["machines"], Machine)
    return Catalog(
        machines=training_machines,
        serving_machines=_serving_machines(serving, training_machines),
        serving_unconfirmed=tuple(serving["unconfirmed"]),
        accelerators=_named(accelerators["accelerators"], Accelerator),
        regions=_named(regions["regions"], Region),
        limits=vertex_limits(directory),
        price_tables=tuple(t for t in tables if t.kind == "training"),
        serving_price_tables=tuple(t for t in tables if t.kind == "serving"),
        sources=sources,
    )


@cache
def vertex_limits(directory: Path = CATALOG_DIR) -> Limits:
    """Vertex's API limits (limits.yaml): display names, labels, restarts and retries, ...

    Read alone, not through `load_catalog`: modules take their constants from it at import,
    and the CLI imports them all before it parses a command; the whole catalog (machines,
    regions, every price table) costs it about 0.15 s."""
    return Limits.model_validate(_read(directory / "limits.yaml"))


def vertex_default_timeout_s() -> int:
    """What Vertex applies when ``scheduling.timeout`` is absent (limits.yaml, from its docs)."""
    default = load_catalog().limits.timeout_s.default
    if default is None:
        raise ValueError("limits.yaml: timeout_s has no default")
    return default
