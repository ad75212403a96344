"""Read an sglang wheel's command line and model asserts from its source, without importing it.

Importing sglang needs torch and a GPU stack; reading the source with `ast`
needs neither. Two ways of declaring options are read:
- `parser.add_argument("--x", ..., choices=...)` calls in sglang/srt/server_args.py
  (every version);
- dataclass fields `name: A[T, "help"]` / `A[T, Arg(choices=..., aliases=...)]`
  of classes defined in or imported into server_args.py (0.5.17 and later build
  the parser from them with add_cli_args_from_dataclass: the flag is
  `--name-with-dashes` unless Arg(cli_name=...) says otherwise).
`choices` are evaluated statically: literals, module constants (also those
imported from other modules of the wheel), class attributes, `list(X)`,
`X.keys()`, `a + b`, function-local variables and zero-argument helper
functions' return values. What cannot be read becomes `Unreadable(why)`, and
the test fails if an emitted value meets one, so the reader gets fixed rather
than the check skipped.
"""

from __future__ import annotations

import ast
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

SERVER_ARGS = "sglang.srt.server_args"
MAJOR = re.compile(r"(major|torch\.cuda\.get_device_capability\(\)\[0\]) == (\d+)$")   # the SM major in an assert
NO_VALUE_ACTIONS = ("store_true", "store_false", "store_const", "count", "StoreTrue", "StoreFalse", "StoreConst")


class Unreadable(Exception):
    """A choices expression this reader cannot evaluate (the message says which)."""


@dataclass(frozen=True)
class Option:
    names: tuple[str, ...]
    choices: frozenset[str] | None      # None: any value
    unreadable: str | None              # why choices could not be read
    takes_value: bool
    where: str                          # module:line in the wheel
    kind: str = ""                      # the value's type as written: "int", "float", "str", ""


class Wheel:
    def __init__(self, path: Path):
        self.path = path
        self.zip = zipfile.ZipFile(path)
        self.files = set(self.zip.namelist())
        self._trees: dict[str, ast.Module] = {}

    # -- modules -------------------------------------------------------------------------

    def file_of(self, module: str) -> str | None:
        base = module.replace(".", "/")
        return next((f for f in (base + ".py", base + "/__init__.py") if f in self.files), None)

    def tree(self, module: str) -> ast.Module:
        if module not in self._trees:
            name = self.file_of(module)
            if name is None:
                raise Unreadable(f"module {module} is not in {self.path.name}")
            self._trees[module] = ast.parse(self.zip.read(name).decode(), filename=name)
        return self._trees[module]

    def modules_under(self, prefix: str) -> list[str]:
        return sorted(f[:-3].replace("/", ".").removesuffix(".__init__") for f in self.files
                      if f.startswith(prefix.replace(".", "/") + "/") and f.endswith(".py"))

    # -- name lookup -------------------------------------------------------------------

    def lookup(self, module: str, name: str, depth: int = 0) -> tuple[str, ast.AST]:
        """The node that binds `name` at module level: (its module, the value/ClassDef/FunctionDef)."""
        if depth > 8:
            raise Unreadable(f"{name}: import chain too deep from {module}")
        bound = _bindings(self.tree(module).body, module).get(name)
        if bound is None:
            raise Unreadable(f"{name} is not bound at module level of {module}")
        if isinstance(bound, _Import):
            if self.file_of(bound.module) is None:
                raise Unreadable(f"{name} comes from {bound.module}, outside the wheel")
            return self.lookup(bound.module, bound.name, depth + 1)
        return module, bound

    # -- evaluation --------------------------------------------------------------------

    def evaluate(self, node: ast.AST, module: str, local: list[ast.stmt] | None = None, depth: int = 0) -> list:
        """A list (or a str/int for scalars) for a choices expression; raises Unreadable."""
        if depth > 12:
            raise Unreadable(f"{ast.unparse(node)}: too deep")

        def ev(n: ast.AST) -> list:
            return self.evaluate(n, module, local, depth + 1)

        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out: list = []
            for e in node.elts:
                out += list(ev(e.value)) if isinstance(e, ast.Starred) else [ev(e)]
            return out
        if isinstance(node, ast.Dict):
            return [ev(k) for k in node.keys if k is not None]
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.BitOr)):
            return list(ev(node.left)) + list(ev(node.right))
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in ("list", "sorted", "set", "tuple", "frozenset") \
                    and len(node.args) == 1:
                return list(ev(node.args[0]))
            if isinstance(f, ast.Attribute) and f.attr == "keys" and not node.args:
                return list(ev(f.value))
            if isinstance(f, ast.Name) and not node.args and not node.keywords:
                where, fn = self._name(f.id, module, local)
                if isinstance(fn, ast.FunctionDef):
                    return self._returns(fn, where, depth)
            raise Unreadable(f"call {ast.unparse(node)} in {module}")
        if isinstance(node, ast.Name):
            where, bound = self._name(node.id, module, local)
            if isinstance(bound, (ast.ClassDef, ast.FunctionDef)):
                raise Unreadable(f"{node.id} in {module} is a {type(bound).__name__}, not a value")
            return self.evaluate(bound, where, local if where == module else None, depth + 1)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            where, cls = self._name(node.value.id, module, local)
            if isinstance(cls, ast.ClassDef):
                value = _bindings(cls.body, where).get(node.attr)
                if value is not None and not isinstance(value, _Import):
                    return self.evaluate(value, where, None, depth + 1)
        raise Unreadable(f"{ast.unparse(node)} in {module}")

    def _name(self, name: str, module: str, local: list[ast.stmt] | None) -> tuple[str, ast.AST]:
        if local is not None:
            bound = _bindings(_walk_statements(local), module).get(name)
            if isinstance(bound, _Import):
                return self.lookup(bound.module, bound.name)
            if bound is not None:
                return module, bound
        return self.lookup(module, name)

    def _returns(self, fn: ast.FunctionDef, module: str, depth: int) -> list:
        """Union of the return values that can be read (a helper may also consult a plugin registry)."""
        values, why = [], []
        for r in (n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None):
            try:
                values += list(self.evaluate(r.value, module, fn.body, depth + 1))
            except Unreadable as e:
                why.append(str(e))
        if not values:
            raise Unreadable(f"no readable return in {module}.{fn.name}: {'; '.join(why)}")
        return values

    # -- the command line --------------------------------------------------------------

    def options(self) -> dict[str, Option]:
        """Every option string of `python -m sglang.launch_server` -> its Option."""
        out: dict[str, Option] = {}
        tree = self.tree(SERVER_ARGS)
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            for call in (n for n in ast.walk(fn) if _is_add_argument(n)):
                self._add(out, self._from_call(call, fn))
        for module, cls in self._field_classes():
            for stmt in cls.body:
                opt = self._from_field(stmt, module)
                if opt:
                    self._add(out, opt)
        return out

    @staticmethod
    def _add(out: dict[str, Option], opt: Option) -> None:
        for n in opt.names:
            out.setdefault(n, opt)

    def _from_call(self, call: ast.Call, fn: ast.FunctionDef) -> Option:
        names = tuple(a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        choices, why = self._choices(kw.get("choices"), SERVER_ARGS, fn.body)
        action = ast.unparse(kw["action"]) if "action" in kw else ""
        nargs = kw.get("nargs")
        takes = not any(a in action for a in NO_VALUE_ACTIONS) and not (
            isinstance(nargs, ast.Constant) and nargs.value == 0)
        kind = ast.unparse(kw["type"]) if "type" in kw else ""
        return Option(names, choices, why, takes, f"{SERVER_ARGS}:{call.lineno}", kind)

    def _choices(self, node: ast.AST | None, module: str, local: list[ast.stmt] | None
                 ) -> tuple[frozenset[str] | None, str | None]:
        if node is None:
            return None, None
        try:
            return frozenset(str(v) for v in self.evaluate(node, module, local)), None
        except Unreadable as e:
            return None, f"choices={ast.unparse(node)}: {e}"

    def _field_classes(self) -> list[tuple[str, ast.ClassDef]]:
        """Classes defined in server_args.py or imported into it from the wheel."""
        tree = self.tree(SERVER_ARGS)
        found = [(SERVER_ARGS, c) for c in tree.body if isinstance(c, ast.ClassDef)]
        for name, bound in _bindings(tree.body, SERVER_ARGS).items():
            if isinstance(bound, _Import) and bound.module.startswith("sglang."):
                try:
                    module, node = self.lookup(SERVER_ARGS, name)
                except Unreadable:
                    continue
                if isinstance(node, ast.ClassDef):
                    found.append((module, node))
        return found

    def _from_field(self, stmt: ast.stmt, module: str) -> Option | None:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            return None
        ann = stmt.annotation
        if not (isinstance(ann, ast.Subscript) and ast.unparse(ann.value) in ("A", "Annotated", "typing.Annotated")):
            return None
        parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        kind, meta = parts[0], parts[1:]
        arg = next((m for m in meta if isinstance(m, ast.Call) and ast.unparse(m.func) == "Arg"), None)
        if arg is None and not any(isinstance(m, ast.Constant) and isinstance(m.value, str) for m in meta):
            return None                                  # no CLI metadata: not registered from the field
        kw = {k.arg: k.value for k in arg.keywords if k.arg} if arg else {}
        if isinstance(kw.get("no_cli"), ast.Constant) and kw["no_cli"].value is True:
            return None
        cli = kw["cli_name"].value if isinstance(kw.get("cli_name"), ast.Constant) else \
            "--" + stmt.target.id.replace("_", "-")
        aliases = tuple(a.value for a in kw["aliases"].elts) if isinstance(kw.get("aliases"), ast.List) else ()
        inner = _unwrap_optional(kind)
        choices, why = self._choices(kw.get("choices"), module, None)
        if choices is None and why is None and isinstance(inner, ast.Subscript) and \
                ast.unparse(inner.value) in ("Literal", "typing.Literal"):
            choices, why = self._choices(inner.slice, module, None)
        action = ast.unparse(kw["action"]) if "action" in kw else ""
        takes = not any(a in action for a in NO_VALUE_ACTIONS) and not (
            not action and isinstance(inner, ast.Name) and inner.id == "bool")
        kind = ast.unparse(kw["type_parser"]) if "type_parser" in kw else ast.unparse(inner)
        return Option((cli, *aliases), choices, why, takes, f"{module}:{stmt.lineno}", kind)

    def enum_members(self, module: str, cls: str) -> set[str]:
        """Member names of an Enum class (for options the wheel validates after parsing, not by choices)."""
        where, node = self.lookup(module, cls)
        if not isinstance(node, ast.ClassDef):
            raise Unreadable(f"{module}.{cls} is not a class")
        return {t.id for s in node.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)}

    # -- model constraints -------------------------------------------------------------

    def mla_backends(self) -> dict[str, str]:
        """Backend -> "non-MLA only" / "MLA only" / "non-MLA only on SM8x", from the registry functions that
        raise on use_mla_backend or assert `(major == 8 and not runner.use_mla_backend) or ...` (fa3)."""
        out: dict[str, str] = {}
        for module in self.modules_under("sglang.srt.layers.attention"):
            for fn in (n for n in self.tree(module).body if isinstance(n, ast.FunctionDef)):
                name = next((d.args[0].value for d in fn.decorator_list if isinstance(d, ast.Call)
                             and ast.unparse(d.func) == "register_attention_backend" and d.args
                             and isinstance(d.args[0], ast.Constant)), None)
                for node in ast.walk(fn):
                    if name and isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
                        parts = [ast.unparse(v) for v in node.values]
                        majors = [m.group(2) for m in map(MAJOR.match, parts) if m]
                        if "not runner.use_mla_backend" in parts and majors:
                            out[name] = f"non-MLA only on SM{majors[0]}x"
                    if name and isinstance(node, ast.If) and isinstance(node.body[0], ast.Raise):
                        test = ast.unparse(node.test)
                        if test == "runner.use_mla_backend":
                            out[name] = "non-MLA only"
                        elif test == "not runner.use_mla_backend":
                            out[name] = "MLA only"
        return out

    def mla_architectures(self) -> set[str]:
        """Architectures whose model config branch sets attention_arch = AttentionArch.MLA."""
        out: set[str] = set()
        for node in ast.walk(self.tree("sglang.srt.configs.model_config")):
            if isinstance(node, ast.If) and any(ast.unparse(s) == "self.attention_arch = AttentionArch.MLA"
                                                for s in node.body):
                out |= {c.left.value for c in ast.walk(node.test) if isinstance(c, ast.Compare)
                        and isinstance(c.left, ast.Constant) and isinstance(c.ops[0], ast.In)}
        return out

    def hybrid_gdn_blackwell(self) -> dict[str, tuple[set[str], str]]:
        """"sm100" / "sm120" -> (backends asserted for hybrid GDN models on Blackwell, module:line).

        Read from `if <...hybrid_gdn...>: if is_blackwell(): ...` in the attention registry: either an
        `allowed = {...}` per SM120/else branch checked by an assert, or one assert of `== "name"` chains.
        """
        module = "sglang.srt.layers.attention.attention_registry"
        out: dict[str, tuple[set[str], str]] = {}
        for gdn in (n for n in ast.walk(self.tree(module)) if isinstance(n, ast.If) and "hybrid_gdn" in
                    ast.unparse(n.test)):
            for bw in (s for s in gdn.body if isinstance(s, ast.If) and ast.unparse(s.test) == "is_blackwell()"):
                where = f"{module}:{bw.lineno}"
                split = next((s for s in bw.body if isinstance(s, ast.If) and "sm120" in ast.unparse(s.test)), None)
                if split is not None:
                    for key, branch in (("sm120", split.body), ("sm100", split.orelse)):
                        value = _bindings(branch, module).get("allowed")
                        if value is None or isinstance(value, _Import):
                            raise Unreadable(f"no `allowed = ...` in the {key} branch at {where}")
                        out[key] = ({str(x) for x in self.evaluate(value, module)}, where)
                    continue
                names = {c.comparators[0].value for a in bw.body if isinstance(a, ast.Assert)
                         for c in ast.walk(a.test) if isinstance(c, ast.Compare) and isinstance(c.ops[0], ast.Eq)
                         and isinstance(c.comparators[0], ast.Constant)}
                if not names:
                    raise Unreadable(f"no backend list under is_blackwell() at {where}")
                out["sm100"] = out["sm120"] = (set(names), where)
        return out

    def architecture_backends(self) -> dict[str, tuple[set[str], str]]:
        """Architecture -> (backends it asserts, module:line), from `assert x in supported_backends` with a
        message "<Architecture> requires one of ..." (GptOssForCausalLM)."""
        out: dict[str, tuple[set[str], str]] = {}
        for module in [SERVER_ARGS, *self.modules_under("sglang.srt.arg_groups")]:
            for fn in (n for n in ast.walk(self.tree(module)) if isinstance(n, ast.FunctionDef)):
                for a in (n for n in ast.walk(fn) if isinstance(n, ast.Assert) and isinstance(n.msg, ast.JoinedStr)):
                    head = next((v.value for v in a.msg.values if isinstance(v, ast.Constant)), "")
                    if " requires one of" not in head:
                        continue
                    names = {c.comparators[0].id for c in ast.walk(a.test) if isinstance(c, ast.Compare)
                             and isinstance(c.ops[0], ast.In) and isinstance(c.comparators[0], ast.Name)}
                    for var in names:
                        values = self.evaluate(ast.Name(var), module, fn.body)
                        out[head.split(" requires")[0]] = (set(values), f"{module}:{a.lineno}")
        return out


@dataclass(frozen=True)
class _Import:
    module: str
    name: str


def _bindings(body: list[ast.stmt], module: str) -> dict[str, ast.AST | _Import]:
    """Names bound by these statements (last binding wins, as at run time)."""
    out: dict[str, ast.AST | _Import] = {}
    for s in body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            out[s.targets[0].id] = s.value
        elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None:
            out[s.target.id] = s.value
        elif isinstance(s, (ast.ClassDef, ast.FunctionDef)):
            out[s.name] = s
        elif isinstance(s, ast.ImportFrom) and s.module is not None or isinstance(s, ast.ImportFrom) and s.level:
            base = _absolute(s, module)
            for a in s.names:
                out[a.asname or a.name] = _Import(base, a.name)
    return out


def _absolute(s: ast.ImportFrom, module: str) -> str:
    if not s.level:
        return s.module or ""
    parts = module.split(".")[: -s.level]
    return ".".join(parts + ([s.module] if s.module else []))


def _walk_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a function body, including those nested in if/try/with blocks."""
    out: list[ast.stmt] = []
    for s in body:
        out.append(s)
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(s, field, None)
            if isinstance(inner, list) and not isinstance(s, (ast.FunctionDef, ast.ClassDef)):
                out += _walk_statements(inner)
        for h in getattr(s, "handlers", []):
            out += _walk_statements(h.body)
    return out


def _is_add_argument(n: ast.AST) -> bool:
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"


def _unwrap_optional(kind: ast.expr) -> ast.expr:
    if isinstance(kind, ast.Subscript) and ast.unparse(kind.value) in ("Optional", "typing.Optional"):
        return kind.slice
    if isinstance(kind, ast.BinOp) and isinstance(kind.op, ast.BitOr):
        return kind.left if ast.unparse(kind.right) == "None" else kind
    return kind
