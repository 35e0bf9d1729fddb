"""The command line's config: before Hydra runs, a group name or key that does not exist fails with the valid names,
closest first, and the output folders are checked (Hydra's own parser reads the command line, ``hydra._internal``:
it has no public one); :func:`compose_config` composes what ``python -m harness <overrides>`` would run."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.core.errors import HarnessError, closest_first, unknown_name
from harness.models.attention import describe
from harness.run.preflight import check_output_paths
from harness.tasks.glue.scores import SCORE_KEYS

#: Config groups whose option names we check before Hydra does, to suggest the closest valid name.
CHECKED_GROUPS = ("task", "model", "sweep", "logger")
PRIMARY = "pkg://conf"


#: the package holding conf/config.yaml
CONFIG_MODULE = "conf"
#: keys whose values are names with characters Hydra's grammar reserves (mteb's "MTEB(eng, v2)"): taken as strings
NAME_KEYS = ("task.benchmark",)


def quote_names(argv: Sequence[str]) -> list[str]:
    """``task.benchmark=MTEB(eng, v2)`` (the shell's quotes gone) single-quoted, as Hydra reads a string."""
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if eq and key.lstrip("+~") in NAME_KEYS and value[:1] not in ("'", '"') and set(value) & set("(), []{}"):
            arg = f"{key}='" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        out.append(arg)
    return out


def compose_config(overrides: Sequence[str] = (), *, config_dir: str | Path | None = None) -> Any:
    """The composed config for ``overrides`` (``config_dir``: a user's); never call it inside a Hydra app."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    extra = [f"hydra.searchpath=[file://{Path(config_dir).resolve()}]"] if config_dir else []
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return compose(config_name="config", overrides=[*extra, *overrides])


def _folder(source: str) -> Path | None:
    """A search-path entry (``pkg://module``, ``file://dir`` or a plain directory) as a folder, if it is one."""
    if source.startswith("pkg://"):
        try:
            return Path(str(resources.files(source[len("pkg://"):].replace("/", "."))))
        except (ModuleNotFoundError, TypeError, ValueError):
            return None
    path = Path(source.removeprefix("file://")).expanduser()
    return path if path.is_dir() else None


def group_options(group: str, sources: Sequence[str] = (PRIMARY,)) -> list[str]:
    """Names of the YAML files in ``<source>/<group>/`` over every config source (the package's conf/ first)."""
    names: set[str] = set()
    for source in sources:
        folder = _folder(source)
        if folder is not None and (folder / group).is_dir():
            names |= {p.name[: -len(".yaml")] for p in (folder / group).iterdir() if p.name.endswith(".yaml")}
    return sorted(names)


def _exists(group: str, name: str, sources: Sequence[str]) -> bool:
    return any((f := _folder(s)) is not None and (f / group / f"{name}.yaml").is_file() for s in sources)


def _parse(argv: list[str]):
    """(Hydra's parsed command line, its overrides), or None to let Hydra report."""
    from hydra._internal.utils import get_args_parser
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args = get_args_parser().parse_args(argv)
    except SystemExit:
        return None
    if args.config_path or args.config_name:
        return None
    parsed = []
    parser = OverridesParser.create()
    for text in args.overrides:
        try:
            parsed += parser.parse_overrides([text])
        except HydraException:
            continue   # Hydra reports its own syntax errors
    return args, parsed


def config_sources(args: argparse.Namespace, overrides: Sequence) -> list[str]:
    """Where Hydra looks for configs: the package's conf/, ``--config-dir`` and ``hydra.searchpath=[...]``."""
    sources = [PRIMARY]
    if args.config_dir:
        sources.append(args.config_dir)
    for o in overrides:
        if o.key_or_group == "hydra.searchpath" and isinstance(o.value(), list):
            sources += [str(v) for v in o.value()]
    return sources


def check_overrides(argv: list[str]) -> None:
    """Every check before Hydra: the config groups named, then the keys and the output folders."""
    check_group_overrides(argv)
    check_key_overrides(argv)


def check_group_overrides(argv: list[str]) -> None:
    """Fail on ``task=nope`` with the valid names, closest first; sweeps are checked value by value."""
    from hydra.core.override_parser.types import ValueType
    if (got := _parse(argv)) is None:
        return
    args, overrides = got
    sources = config_sources(args, overrides)
    for o in overrides:
        if o.key_or_group not in CHECKED_GROUPS or o.is_delete():
            continue
        group, options = o.key_or_group, group_options(o.key_or_group, sources)
        if o.value_type == ValueType.GLOB_CHOICE_SWEEP:
            glob = o.value()
            if not glob.filter(options):
                raise HarnessError(f"{group}=glob({', '.join(glob.include)}) matches no {group}; valid: "
                                   f"{', '.join(options)}")
            continue
        if o.value_type in (ValueType.CHOICE_SWEEP, ValueType.SIMPLE_CHOICE_SWEEP):
            values = list(o.sweep_string_iterator())
        elif o.value_type == ValueType.ELEMENT:
            values = [o.value()]
        else:
            continue   # range/interval sweeps over a group: Hydra explains
        for v in values:
            if v in (None, "", "null") or not isinstance(v, str) or _exists(group, v, sources):
                continue
            how = f"Add conf/{group}/{v}.yaml (or {group}/{v}.yaml in your --config-dir) to define a new one."
            if group == "model":
                how += " Any hub id or local directory also works: model.path=<id or dir>."
            raise unknown_name(group, v, options, how)


def _groups(sources: Sequence[str]) -> set[str]:
    """Config group names (folders) over every config source, e.g. task, model, hydra/launcher."""
    out: set[str] = set()
    for source in sources:
        folder = _folder(source)
        if folder is not None:
            out |= {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_dir() and p.name != "__pycache__"}
    return out


def _first(o) -> str | None:
    """A group override's value (a sweep's first value), as override text; None when it cannot be told."""
    from hydra.core.override_parser.types import ValueType
    if o.value_type == ValueType.ELEMENT:
        return o.input_line
    if o.value_type in (ValueType.CHOICE_SWEEP, ValueType.SIMPLE_CHOICE_SWEEP):
        return f"{o.get_key_element()}={next(iter(o.sweep_string_iterator()))}"
    return None


def compose_first(args: argparse.Namespace, overrides: Sequence) -> tuple[DictConfig, list] | None:
    """The config the first job composes from group choices and added keys, and the key overrides left."""
    from hydra.core.global_hydra import GlobalHydra
    groups = _groups(config_sources(args, overrides))
    base, keys = [], []
    if args.config_dir and any(o.key_or_group == "hydra.searchpath" for o in overrides):
        return None
    for o in overrides:
        if o.key_or_group in groups or o.key_or_group.startswith("hydra"):
            text = _first(o)
            if text is None:
                return None
            base.append(text)
        elif o.is_add() or o.is_force_add() or o.is_delete():
            if o.is_sweep_override():
                return None
            base.append(o.input_line)
        else:
            keys.append(o)
    if GlobalHydra.instance().is_initialized():
        return None
    try:
        return compose_config(base, config_dir=args.config_dir), keys
    except Exception:   # Hydra's own errors (a bad group, a syntax error) are Hydra's to report
        return None


def _dotted(node, prefix: str = "") -> list[str]:
    """Every key of a config, dotted (intermediate nodes too)."""
    out = []
    for k in node.keys() if isinstance(node, DictConfig) else ():
        key = f"{prefix}{k}"
        out.append(key)
        child = node._get_node(k)
        if isinstance(child, DictConfig):
            out += _dotted(child, key + ".")
    return out


def check_key_overrides(argv: list[str]) -> None:
    """``task.lrr=1`` fails with the closest valid keys, before Hydra; output folders are checked writable."""
    if (got := _parse(argv)) is None:
        return
    args, overrides = got
    if (composed := compose_first(args, overrides)) is None:
        return
    cfg, keys = composed
    valid = _dotted(cfg)
    for o in keys:
        key = o.key_or_group
        if key not in valid:
            parent = key.rpartition(".")[0]
            near = closest_first(key, [v for v in valid if v.rpartition(".")[0] == parent] or valid)[:3]
            raise HarnessError(f"unknown config key {key!r} (from {o.input_line!r}); closest valid keys: "
                               f"{', '.join(near)}. Fix the name (a key added with +{key}=... is refused too "
                               "unless the task reads it).")
    if args.cfg:
        _note_attention(cfg, keys)
        _note_glue_scores(cfg, keys)
    if args.cfg or args.help or args.hydra_help or args.info or args.shell_completion:
        return
    OmegaConf.set_struct(cfg, False)
    for o in keys:
        if o.key_or_group.startswith("paths") and o.is_sweep_override():
            return
        if not o.is_sweep_override():
            OmegaConf.update(cfg, o.key_or_group, o.value(), merge=False)
    check_output_paths(cfg.paths)


def _note_glue_scores(cfg: DictConfig, keys: list) -> None:
    """``--cfg`` of task=glue: which metric each task is scored by where its metric kind's name does not say."""
    task = cfg.get("task") or {}
    if task.get("name") != "glue":
        return
    metrics = {str(name): str(d.get("metric")) for name, d in (task.get("definitions") or {}).items()}
    for o in keys:
        parts = str(o.key_or_group).split(".")
        if len(parts) == 4 and parts[:2] == ["task", "definitions"] and parts[3] == "metric":
            metrics[parts[2]] = str(o.value())
    for name, metric in metrics.items():
        key = SCORE_KEYS.get(metric)
        if key is not None and key != metric:
            beside = ", its other metrics recorded beside" if metric in ("accuracy_f1", "f1", "f1_accuracy") else ""
            print(f"# task.definitions.{name}.metric: {metric} -> scored by {key}{beside}", file=sys.stderr)


def _note_attention(cfg: DictConfig, keys: list) -> None:
    """``--cfg`` shows the config as written (``auto`` keeps run ids machine-independent); say what it resolves to."""
    requested = next((str(o.value()) for o in keys if o.key_or_group == "model.attn_implementation"),
                     str(cfg.model.get("attn_implementation", "")))
    line = describe(requested)
    if line:
        print(line, file=sys.stderr)
