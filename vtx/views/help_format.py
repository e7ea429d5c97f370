"""How `vtx ... --help` names the values options and arguments take.

Typer 0.29 labels every parameter with its Python annotation: `--yes <bool>` on a flag that
takes no value, `--set <list[str]>` on an option given once per value, `{file}` for a required
argument in the usage line. Typer has no setting for this, so the three label methods are
replaced here, once, when the CLI is built: flags show no value, repeatable options show the
type of one value, arguments read as in click, gcloud and man pages (`FILE`, `[RUN_ID]`).
"""

from __future__ import annotations

from typer._click import Context
from typer.core import TyperArgument, TyperOption

_typer_option_label = TyperOption.display_type_rich
_typer_argument_label = TyperArgument.display_type_rich
_LIST = ("<list[", "]>")


def _one_value(label: str | None) -> str | None:
    """`<list[Path]>` -> `<Path>`: a repeatable option or a variadic argument takes many of one."""
    if label and label.startswith(_LIST[0]) and label.endswith(_LIST[1]):
        return f"<{label[len(_LIST[0]) : -len(_LIST[1])].lower()}>"
    return label


def _option_label(self: TyperOption, ctx: Context) -> str | None:
    if self.metavar is not None:
        return self.metavar
    if self.is_flag:
        return None  # a flag takes no value: its presence is the value
    return _one_value(_typer_option_label(self, ctx))


def _argument_label(self: TyperArgument, ctx: Context) -> str | None:
    return _one_value(_typer_argument_label(self, ctx))


def _argument_name(self: TyperArgument) -> str:
    name = (self.metavar or self.name or "arg").upper()
    return f"{name}..." if self.nargs != 1 else name


def _argument_usage(self: TyperArgument) -> str:
    name = _argument_name(self)
    return name if self.required else f"[{name}]"


def install() -> None:
    """Replace Typer's labels with readable ones; idempotent."""
    TyperOption.display_type_rich = _option_label  # type: ignore[method-assign]
    TyperArgument.display_type_rich = _argument_label  # type: ignore[method-assign]
    TyperArgument._rich_display_name = _argument_name  # type: ignore[method-assign]
    TyperArgument._usage_display_name = _argument_usage  # type: ignore[method-assign]
