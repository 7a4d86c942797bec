"""Suite YAML -> validated Suite; every error names the file, the key path (with its line where the YAML has it) and what was expected."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import ValidationError

from xlabench import impls as catalog
from xlabench.results.files import NotUtf8, read_utf8
from xlabench.workloads import PARAMS as WORKLOAD_PARAMS
from xlabench.suite import tuned as tuned_lib
from xlabench.suite.expand import Suite, expand
from xlabench.suite.yaml_errors import _fields_for, _pydantic_message, _where
from xlabench.suite.spec import (
    MAX_YAML_NODES, Impls, SuiteError, SuiteSpec, _check_backends, matrix_keys,
)


def load(path: str | Path) -> Suite:
    """Read, parse and validate a suite file, including every case of every profile."""
    path = Path(path)
    if not path.exists():
        raise SuiteError(f"{path}: no such file")
    text = _read_text(path)
    try:
        root = yaml.compose(text)
        _check_size(path, root)  # before anything walks the tree or builds it: aliases share nodes
        data = yaml.safe_load(text)
    except RecursionError:
        raise SuiteError(f"{path}: YAML nested too deeply to read; flatten it") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise SuiteError(f"{where}: YAML syntax error: {problem}") from None
    if not isinstance(data, dict):
        got = "nothing (an empty file, or only comments)" if data is None else f"a {type(data).__name__} ({text.strip().splitlines()[0][:60]!r})"
        raise SuiteError(f"{path}: expected a mapping of suite keys at the top level (name, workload, impls, params, "
                         f"...; see suites/), got {got}")
    _check_duplicate_keys(path, root)
    try:
        spec = SuiteSpec.model_validate(data)
    except ValidationError as e:
        lines = [f"{_where(path, root, tuple(err['loc']))}: {_pydantic_message(err, _fields_for(tuple(err['loc'])))}"
                 for err in e.errors()]
        raise SuiteError("\n".join(lines)) from None
    suite = Suite(path, spec, _tuned(path, spec, root))
    _check_names(suite, root)
    for name in [""] + list(spec.profiles):  # every profile must expand cleanly, not only the one picked
        expand(suite, name, root=root)
    return suite


def _children(node: Any) -> list[tuple[str, Any]]:
    """(name, node) for each child of a YAML node: list items by index; a mapping's keys and values."""
    if isinstance(node, yaml.SequenceNode):
        return [(str(i), v) for i, v in enumerate(node.value)]
    if isinstance(node, yaml.MappingNode):
        return [c for k, v in node.value for c in ((str(k.value), k), (str(k.value), v))]
    return []


def _check_size(path: Path, root: Any) -> None:
    """The tree, every alias written out, has at most MAX_YAML_NODES nodes, and no alias refers to a node
    that contains it. Each node is visited once (its written-out size memoised), without recursion."""
    sizes: dict[int, int] = {}
    ancestors: set[int] = set()
    stack: list[tuple[Any, tuple[str, ...], bool]] = [(root, (), False)]
    while stack:
        node, at, leaving = stack.pop()
        key = id(node)
        if leaving:
            ancestors.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for _, c in _children(node))
            if sizes[key] > MAX_YAML_NODES:
                raise SuiteError(f"{_where(path, root, at)}: expands to more than {MAX_YAML_NODES:,} YAML nodes "
                                 f"once its aliases are written out (limit of {MAX_YAML_NODES:,}); use fewer "
                                 "aliases or split the suite")
        elif key in ancestors:
            raise SuiteError(f"{_where(path, root, at)}: refers to itself through an alias; "
                             "write the value out")
        elif key not in sizes:
            ancestors.add(key)
            stack.append((node, at, True))
            stack.extend((child, (*at, name), False) for name, child in reversed(_children(node)))


def _check_duplicate_keys(path: Path, node: Any, at: tuple[str, ...] = (), seen: Optional[set[int]] = None) -> None:
    """No mapping sets a key twice (YAML would keep the last value silently): file:line of the second.
    A node that aliases reach more than once is checked once."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _check_duplicate_keys(path, v, (*at, str(i)), seen)
    if not isinstance(node, yaml.MappingNode):
        return
    first: dict[str, int] = {}
    for k, v in node.value:
        key, line = str(k.value), k.start_mark.line + 1
        if key in first:
            raise SuiteError(f"{path}:{line}: {'.'.join((*at, key))}: set twice (first at line {first[key]}); "
                             "set each key once")
        first[key] = line
        _check_duplicate_keys(path, v, (*at, key), seen)


def _tuned(path: Path, spec: SuiteSpec, root: Any) -> tuple[tuned_lib.TunedConfig, ...]:
    """The entries of the suite's `tuned:` file (relative to the suite file)."""
    if spec.tuned is None:
        return ()
    try:
        return tuned_lib.load(path.parent / spec.tuned, spec.workload)
    except tuned_lib.TunedFileError as e:
        raise SuiteError(f"{_where(path, root, ('tuned',))}: {e}") from None


def _read_text(path: Path) -> str:
    """The file as UTF-8 text; a SuiteError naming the line, column and key of the first bad byte."""
    try:
        return read_utf8(path)
    except OSError as e:
        raise SuiteError(f"{path}: cannot read: {e.strerror or e}") from None
    except NotUtf8 as e:
        key = _key_at_line(e.text, e.line)
        raise SuiteError(f"{path}:{e.line}:{e.column}: {key or '(top level)'}: not UTF-8 text (byte "
                         f"0x{e.byte:02x}); save the file as UTF-8") from None


def _key_at_line(text: str, line: int) -> str:
    """The dotted key path of the deepest YAML node that spans ``line`` (1-based), or '' if none."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return ""
    path: list[str] = []
    while node is not None:
        children = node.value if isinstance(node, yaml.MappingNode) else (
            [(None, v) for v in node.value] if isinstance(node, yaml.SequenceNode) else [])
        for i, (k, v) in enumerate(children):
            first = (k or v).start_mark.line + 1
            if first <= line <= v.end_mark.line + (v.end_mark.column > 0):
                path.append(str(k.value) if k is not None else str(i))
                node = v
                break
        else:
            break
    return ".".join(path)


def _impl_lists(impls: Impls) -> list[tuple[tuple[Any, ...], Optional[str], list[str]]]:
    """(key path suffix, backend or None for 'any', names) for each list in an impls entry."""
    if isinstance(impls, dict):
        return [((b,), b, names) for b, names in impls.items()]
    return [((), None, impls)]


def _check_names(suite: Suite, root: Any) -> None:
    """Every parameter, backend and impl name of the suite and its profiles is known (file:line: key)."""
    clashes = catalog.entry_point_clashes()
    if clashes:
        raise SuiteError(f"{suite.path}: {clashes[0]}")
    _check_params(suite, root)
    _check_impls(suite, root)


def _check_params(suite: Suite, root: Any) -> None:
    """Parameters are the workload's, and none is set twice in one section."""
    spec = suite.spec
    param_fields = list(WORKLOAD_PARAMS[spec.workload].model_fields)
    sections = [((), spec.params, spec.matrix)] + [
        (("profiles", n), p.params, p.matrix) for n, p in spec.profiles.items()]
    for prefix, params, matrix in sections:
        swept: dict[str, str] = {}
        for section, key in [("params", k) for k in params] + [("matrix", k) for k in matrix]:
            for name in ([key] if section == "params" else matrix_keys(key)):
                if name not in param_fields:
                    raise SuiteError(
                        f"{_where(suite.path, root, prefix + (section, key))}: unknown parameter {name!r} for "
                        f"workload {spec.workload!r} (expected one of: {', '.join(param_fields)})")
                if name in swept:
                    raise SuiteError(f"{_where(suite.path, root, prefix + (section, key))}: {name!r} is set "
                                     f"twice (also in {swept[name]}); keep one")
                swept[name] = f"{section}.{key}"


def _check_impls(suite: Suite, root: Any) -> None:
    """Backends and impl names (per backend where the suite lists impls per backend) exist in the catalog."""
    spec = suite.spec
    impl_entries: list[tuple[tuple[Any, ...], Impls]] = [(("impls",), spec.impls)]
    for n, p in spec.profiles.items():
        if p.impls is not None:
            impl_entries.append((("profiles", n, "impls"), p.impls))
        if p.backends is not None:
            try:
                _check_backends(p.backends)
            except ValueError as e:
                raise SuiteError(f"{_where(suite.path, root, ('profiles', n, 'backends'))}: {e}") from None
    for loc, entry in impl_entries:
        for suffix, backend, names in _impl_lists(entry):
            if backend is not None and backend not in catalog.BACKENDS:
                raise SuiteError(f"{_where(suite.path, root, loc + suffix)}: unknown backend {backend!r} "
                                 f"(expected one of: {', '.join(catalog.BACKENDS)})")
            valid = catalog.names_for(spec.workload, backend)
            if not names:
                raise SuiteError(f"{_where(suite.path, root, loc + suffix)}: empty list; expected impls from: "
                                 f"{', '.join(valid)}")
            for i, name in enumerate(names):
                if name not in valid:
                    _check_user_impl(suite, root, loc + suffix + (i,), name, backend, valid)


def _check_user_impl(suite: Suite, root: Any, loc: tuple[Any, ...], name: str, backend: Optional[str],
                     valid: list[str]) -> None:
    """A name that is no built-in must be an import path (``module:attr``, never imported here) or an
    installed entry point, on a workload and backend that take user impls."""
    where = _where(suite.path, root, loc)
    workload = suite.spec.workload
    user = catalog.is_path(name) or name in catalog.entry_point_impls()
    if not user:
        on = f" on backend {backend!r}" if backend else ""
        takes_paths = workload in catalog.USER_WORKLOADS and backend in (None, *catalog.USER_BACKENDS)
        hint = "; or an import path package.module:function" if takes_paths else ""
        raise SuiteError(f"{where}: unknown impl {name!r} for workload {workload!r}{on} (expected one of: "
                         f"{', '.join(valid)}{hint})")
    problem = catalog.path_problem(name) if catalog.is_path(name) else None
    if problem:
        raise SuiteError(f"{where}: {problem}")
    if workload not in catalog.USER_WORKLOADS:
        raise SuiteError(f"{where}: user impl {name!r}: workload {workload!r} takes built-in impls only "
                         f"(user impls: {', '.join(catalog.USER_WORKLOADS)})")
    if backend is not None and backend not in catalog.USER_BACKENDS:
        raise SuiteError(f"{where}: user impl {name!r}: backend {backend!r} takes built-in impls only "
                         f"(user impls: {', '.join(catalog.USER_BACKENDS)})")
