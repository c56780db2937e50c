"""One error for all the operators of a model that no layer runs.

Meeting unsupported operators one at a time (fix one, load again, meet the next) wastes an
afternoon. So the graph looks up every operator first and raises one UnsupportedOperatorError
that lists them all, each with its line and name, the closest known types for a likely typo,
and what to do: `kuiper ops` lists what Kuiper runs, and a type of your own runs as a custom
operator, through a plugin (kuiper/PLUGINS.md). The error keeps the list as `.operators`,
(line, name, type) triples, for tools such as `kuiper info` that mark them.
"""

from __future__ import annotations

import difflib

from kuiper.core import plugins, registry
from kuiper.core.errors import UnsupportedOperatorError

SHOWN = 20  # a hostile or foreign file may hold thousands; the first ones say enough
CUSTOM = ("a type of your own runs as a custom operator, through a plugin "
          "(kuiper/PLUGINS.md)")


def known_types(backend: str) -> list[str]:
    """The types a `backend` graph runs: its own layers and those of its fallback backend."""
    types = set(registry.supported(backend))
    if backend in registry.FALLBACK:
        types |= set(registry.supported(registry.FALLBACK[backend]))
    return sorted(types)


def unsupported_error(path: str, backend: str, missing: list) -> UnsupportedOperatorError:
    """The error for `missing`, the operators (with .line, .name, .type) without a layer."""
    known = known_types(backend)
    ops_hint = f"`kuiper ops` lists the {len(known)} known {backend} types"
    if len(missing) == 1:  # the short form: one line says it all
        op = missing[0]
        message = (f"{path}, line {op.line}: operator '{op.name}': no {backend} layer for "
                   f"operator type '{op.type}'.{close_hint(op.type, known)} ({ops_hint}; "
                   f"{CUSTOM}.){plugins.missing_type_hint(op.type)}")
    else:
        lines = [f"{path}: {len(missing)} operators have no {backend} layer:"]
        lines += [f"  line {op.line}: operator '{op.name}' ({op.type})"
                  f"{close_hint(op.type, known, ' -- did you mean')}" for op in missing[:SHOWN]]
        if len(missing) > SHOWN:
            lines.append(f"  ... and {len(missing) - SHOWN} more")
        types = sorted({op.type for op in missing})
        lines.append(f"{len(types)} type(s): {', '.join(types[:SHOWN])}"
                     f"{', ...' if len(types) > SHOWN else ''}. {ops_hint}; {CUSTOM}.")
        # the plugin advice for kept PyTorch module types: the first few say it all
        module_types = [t for t in types if plugins.is_module_type(t)][:3]
        lines += [plugins.missing_type_hint(t).strip() for t in module_types]
        message = "\n".join(lines)
    error = UnsupportedOperatorError(message)
    error.operators = [(op.line, op.name, op.type) for op in missing]
    return error


def close_hint(op_type: str, known: list[str], ask: str = " Did you mean") -> str:
    """The closest known types, for a likely typo ('nn.ReLu' -> nn.ReLU)."""
    close = difflib.get_close_matches(op_type, known, n=3)
    return f"{ask} {', '.join(close)}?" if close else ""
