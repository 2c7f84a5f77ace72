#!/usr/bin/env python3
"""Generate engine/kv_vllm_flags_data.c from vLLM's own argument parsers.

Reads each release's Python source statically (the ast module; nothing is
imported or run) and writes, for every option `vllm serve` of that release
accepts, its spellings (long name and short forms), whether it takes a value,
and the releases that have it; plus each release's --quantization methods and
--kv-cache-dtype values.

Where the options come from, per release:
  vllm/engine/arg_utils.py          EngineArgs / AsyncEngineArgs.add_cli_args
  the module defining make_arg_parser (vllm/entrypoints/openai/cli_args.py,
                                    later launchers/ or common/cli_args.py):
                                    literal add_argument calls and the fields
                                    of the frontend dataclasses whose
                                    add_cli_args registers one option per field
  vllm/entrypoints/cli/serve.py     the serve subcommand (0.7.3 on; before, the
                                    serve_parser of vllm/scripts.py)
An option given as **kwargs of get_kwargs(SomeConfig)["field"] takes its
shape from the field's annotation in the config class, as get_kwargs does
(bool: a switch with --no-, list: one or more values, bool | str: an
optional value, else one value).

Usage: scripts/gen_vllm_flags.py [SRC_DIR] [OUT.c]
  SRC_DIR  holds one folder per release, X.Y.Z/vllm/... (default /work/vllm-src:
           unzip 'vllm/*.py' of each wheel, see the lead's rules)
  OUT.c    default engine/kv_vllm_flags_data.c
Releases are the folders from 0.6.4 on; the table says which were read.
"""
import ast
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = sys.argv[1] if len(sys.argv) > 1 else "/work/vllm-src"
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "engine", "kv_vllm_flags_data.c")

NARGS_NONE, NARGS_ONE, NARGS_MANY, NARGS_OPT = 0, 1, 2, 3


def vkey(v):
    parts = []
    for p in v.split("."):
        m = re.match(r"(\d+)(.*)", p)
        parts.append((int(m.group(1)), m.group(2)) if m else (0, p))
    return parts


def releases():
    out = [d for d in os.listdir(SRC) if re.match(r"^\d+\.\d+\.\d+", d) and os.path.isdir(os.path.join(SRC, d, "vllm"))]
    out = [d for d in out if vkey(d) >= vkey("0.6.4")]
    return sorted(out, key=vkey)


def parse(path):
    try:
        return ast.parse(open(path, encoding="utf-8").read())
    except (OSError, SyntaxError):
        return None


def annotation_shape(ann):
    """get_kwargs' rule for a dataclass field's annotation (engine/arg_utils.py _compute_kwargs)."""
    # get_type_hints sees through Annotated[X, ...] and pydantic's SkipValidation[X]
    while isinstance(ann, ast.Subscript) and ast.unparse(ann.value).split(".")[-1] in ("Annotated", "SkipValidation"):
        ann = ann.slice.elts[0] if isinstance(ann.slice, ast.Tuple) else ann.slice
    text = ast.unparse(ann) if ann is not None else ""
    text = text.replace("Optional[", "").replace("typing.", "")
    names = set(re.findall(r"[A-Za-z_]+", text))
    if "bool" in names and "str" in names:
        return NARGS_OPT, 0
    if "bool" in names and not (names - {"bool", "None", "Union"}):
        return NARGS_NONE, 1
    if re.search(r"\b(list|List)\[", text):
        return NARGS_MANY, 0
    return NARGS_ONE, 0


class ConfigFields:
    """Field annotations of every class in a release's vllm/config* modules
    (and any other module that defines a class get_kwargs is called on)."""

    def __init__(self, base):
        self.fields = {}
        paths = []
        cfg = os.path.join(base, "vllm", "config")
        if os.path.isdir(cfg):
            paths += [os.path.join(cfg, f) for f in os.listdir(cfg) if f.endswith(".py")]
        if os.path.isfile(os.path.join(base, "vllm", "config.py")):
            paths.append(os.path.join(base, "vllm", "config.py"))
        for extra in ("vllm/engine/arg_utils.py", "vllm/attention/backends/registry.py"):
            p = os.path.join(base, extra)
            if os.path.isfile(p):
                paths.append(p)
        for p in paths:
            self.add_module(parse(p))

    def add_module(self, tree):
        if tree is None:
            return
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                d = self.fields.setdefault(node.name, {})
                for st in node.body:
                    if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                        d.setdefault(st.target.id, st.annotation)
                bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
                d.setdefault("__bases__", bases)

    def shape(self, cls, field):
        seen = set()
        while cls and cls not in seen:
            seen.add(cls)
            d = self.fields.get(cls, {})
            if field in d:
                return annotation_shape(d[field])
            bases = d.get("__bases__", [])
            cls = bases[0] if bases else None
        return NARGS_ONE, 0


def kwargs_var_classes(tree):
    """name -> config class for `x_kwargs = get_kwargs(SomeConfig)`."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            f = node.value.func
            fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if fname in ("get_kwargs", "_compute_kwargs") and node.value.args:
                a = node.value.args[0]
                cls = a.id if isinstance(a, ast.Name) else None
                for t in node.targets:
                    if isinstance(t, ast.Name) and cls:
                        out[t.id] = cls
    return out


def shape_of_call(call, kwvars, fields):
    nargs, neg = NARGS_ONE, 0
    for kw in call.keywords:
        if kw.arg is None:  # **model_kwargs["field"], or **{**model_kwargs["field"], "default": None}
            v = kw.value
            if isinstance(v, ast.Dict):
                v = next((val for key, val in zip(v.keys, v.values) if key is None), v)
            if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name) and v.value.id in kwvars:
                sl = v.slice
                if isinstance(sl, ast.Constant) and isinstance(sl.value, str):
                    nargs, neg = fields.shape(kwvars[v.value.id], sl.value)
    for kw in call.keywords:
        if kw.arg == "action":
            a = ast.unparse(kw.value)
            if "BooleanOptional" in a:
                nargs, neg = NARGS_NONE, 1
            elif any(s in a for s in ("store_true", "store_false", "store_const", "count", "help", "version")):
                nargs, neg = NARGS_NONE, 0
            elif "append" in a:
                nargs = NARGS_ONE
        elif kw.arg == "nargs":
            if isinstance(kw.value, ast.Constant):
                n = kw.value.value
                nargs = NARGS_MANY if n in ("+", "*") else NARGS_OPT if n == "?" else NARGS_ONE if n in (1,) else nargs
    return nargs, neg


def options_of_module(tree, fields, out, receiver=None):
    """Literal add_argument calls (on `receiver` only, when given), and
    frontend dataclasses registered field by field."""
    if tree is None:
        return
    kwvars = kwargs_var_classes(tree)
    fields.add_module(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            names = [n for n in names if n.startswith("-")]
            if not names or (receiver and ast.unparse(node.func.value) != receiver):
                continue
            nargs, neg = shape_of_call(node, kwvars, fields)
            add(out, names, nargs, neg)
    # class X(...): ... def add_cli_args(cls, parser): kw = get_kwargs(cls); for key in kw: add_argument(f"--{key}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for fn in node.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name == "add_cli_args"):
                continue
            src = ast.unparse(fn)
            m = re.search(r"get_kwargs\((\w+)\)", src)
            if not m or "add_argument" not in src:
                continue
            target = node.name if m.group(1) == "cls" else m.group(1)
            for cls_name in class_chain(tree, target):
                for field, ann in fields.fields.get(cls_name, {}).items():
                    if field.startswith("_") or field == "__bases__":
                        continue
                    nargs, neg = annotation_shape(ann)
                    add(out, ["--" + field.replace("_", "-")], nargs, neg)
            # subclasses registered by the same method (FrontendArgs(BaseFrontendArgs))
            for sub in ast.walk(tree):
                if isinstance(sub, ast.ClassDef) and target in [b.id for b in sub.bases if isinstance(b, ast.Name)]:
                    for field, ann in fields.fields.get(sub.name, {}).items():
                        if field.startswith("_") or field == "__bases__":
                            continue
                        nargs, neg = annotation_shape(ann)
                        add(out, ["--" + field.replace("_", "-")], nargs, neg)


def class_chain(tree, name):
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    chain, seen = [], set()
    while name in classes and name not in seen:
        seen.add(name)
        chain.append(name)
        bases = [b.id for b in classes[name].bases if isinstance(b, ast.Name)]
        name = bases[0] if bases else None
    return chain


def add(out, names, nargs, neg):
    longs = [n for n in names if n.startswith("--")]
    shorts = [n for n in names if not n.startswith("--")]
    if not longs:  # a short form alone (-O): keyed by itself
        longs = shorts[:1]
        shorts = shorts[1:]
    key = longs[0].lstrip("-")
    e = out.setdefault(key, {"aliases": set(), "nargs": nargs, "neg": neg})
    e["aliases"].update(n.lstrip("-") for n in longs[1:] + shorts)
    e["nargs"], e["neg"] = nargs, neg or e["neg"]


def literal_strings(node):
    if isinstance(node, ast.Subscript):  # Literal["a", "b"]
        node = node.slice
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if isinstance(node, ast.Dict):
        return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


def quant_methods(base):
    tree = parse(os.path.join(base, "vllm", "model_executor", "layers", "quantization", "__init__.py"))
    if tree is None:
        return []
    found = {}
    for node in tree.body:
        tgt = node.target if isinstance(node, ast.AnnAssign) else node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(tgt, ast.Name) and tgt.id in ("QUANTIZATION_METHODS", "QuantizationMethods") and node.value is not None:
            vals = literal_strings(node.value)
            if vals:
                found[tgt.id] = vals
    return found.get("QuantizationMethods") or found.get("QUANTIZATION_METHODS") or []


def quant_needs_file(base):
    """The --quantization methods whose config class reads a file beside
    config.json when the checkpoint has no quantization_config (its
    get_config_filenames() lists one): model_loader/weight_utils.py
    get_quant_config then raises "Cannot find the config file for X" on an
    unquantized checkpoint. Methods that list none quantize online."""
    qdir = os.path.join(base, "vllm", "model_executor", "layers", "quantization")
    tree = parse(os.path.join(qdir, "__init__.py"))
    if tree is None:
        return []
    imports = {}  # class name -> module path
    mapping = {}  # method -> class name
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            mod = node.module
            if node.level:
                mod = "vllm.model_executor.layers.quantization." + mod
            for a in node.names:
                imports[a.asname or a.name] = mod
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Name):
                    mapping[k.value] = v.id
    cache = {}

    def class_node(mod, name):
        path = os.path.join(base, *mod.split(".")) + ".py"
        tree = cache.get(path) or parse(path)
        cache[path] = tree
        for n in ast.walk(tree) if tree else []:
            if isinstance(n, ast.ClassDef) and n.name == name:
                return n, tree, mod
        return None, None, None

    def needs(mod, name, depth=0):
        """1 lists a file, 0 lists none, None unknown."""
        cls, tree, mod = class_node(mod, name)
        if cls is None or depth > 6:
            return None
        for fn in cls.body:
            if isinstance(fn, ast.FunctionDef) and fn.name == "get_config_filenames":
                for st in ast.walk(fn):
                    if isinstance(st, ast.Return) and isinstance(st.value, (ast.List, ast.Tuple)):
                        return 1 if st.value.elts else 0
                return None
        local = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module is not None:
                m2 = n.module if not n.level else ".".join(mod.split(".")[:-n.level] + [n.module])
                for a in n.names:
                    local[a.asname or a.name] = m2
        for b in cls.bases:
            bname = b.id if isinstance(b, ast.Name) else None
            if bname and bname != "QuantizationConfig":
                r = needs(local.get(bname, mod), bname, depth + 1)
                if r is not None:
                    return r
        return None

    # methods get_quant_config answers before it looks for the file (gguf,
    # bitsandbytes: "if model_config.quantization == ..." returns early)
    early = set()
    wu = os.path.join(base, "vllm", "model_executor", "model_loader", "weight_utils.py")
    text = open(wu, encoding="utf-8").read() if os.path.isfile(wu) else ""
    i = text.find("def get_quant_config")
    j = text.find("get_config_filenames()", i)
    if i >= 0 and j > i:
        early = set(re.findall(r'quantization == "(\w+)"', text[i:j]))
    return sorted(m for m, c in mapping.items() if c in imports and m not in early and needs(imports[c], c) == 1)


def kv_dtypes(base):
    paths = [os.path.join(base, "vllm", "config", "cache.py"), os.path.join(base, "vllm", "config.py")]
    for p in paths:
        tree = parse(p)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "CacheDType":
                vals = literal_strings(node.value)
                if vals:
                    return vals
    tree = parse(os.path.join(base, "vllm", "engine", "arg_utils.py"))
    for node in ast.walk(tree) if tree else []:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            if any(isinstance(a, ast.Constant) and a.value == "--kv-cache-dtype" for a in node.args):
                for kw in node.keywords:
                    if kw.arg == "choices":
                        return literal_strings(kw.value)
    return []


def quant_checked_by_argparse(base):
    """1: --quantization has argparse choices (an unknown method is an argparse
    error); 0: the option takes any text and ModelConfig._verify_quantization
    raises "Unknown quantization method" (the field's annotation admits str)."""
    fields = ConfigFields(base)
    tree = parse(os.path.join(base, "vllm", "engine", "arg_utils.py"))
    for node in ast.walk(tree) if tree else []:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            if any(isinstance(a, ast.Constant) and a.value == "--quantization" for a in node.args):
                if any(kw.arg == "choices" for kw in node.keywords):
                    return 1
    for cls in ("ModelConfig",):
        ann = fields.fields.get(cls, {}).get("quantization")
        if ann is not None:
            return 0 if "str" in re.findall(r"[A-Za-z_]+", ast.unparse(ann)) else 1
    return 1


def serve_options(base):
    fields = ConfigFields(base)
    out = {}
    files = [os.path.join(base, "vllm", "engine", "arg_utils.py"), os.path.join(base, "vllm", "entrypoints", "cli", "serve.py")]
    for dirpath, _, names in os.walk(os.path.join(base, "vllm", "entrypoints")):
        for n in names:
            p = os.path.join(dirpath, n)
            if n.endswith(".py") and "run_batch" not in n and "def make_arg_parser" in open(p, encoding="utf-8").read():
                files.append(p)
    for p in files:
        if os.path.isfile(p):
            options_of_module(parse(p), fields, out)
    # before 0.7.3 the serve subcommand lived in vllm/scripts.py beside others
    scripts = os.path.join(base, "vllm", "scripts.py")
    if os.path.isfile(scripts):
        options_of_module(parse(scripts), fields, out, receiver="serve_parser")
    # vllm serve's own: the positional model_tag is not an option; -h/--help always
    out.pop("help", None)
    return out


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    rels = releases()
    if not rels:
        sys.exit(f"no releases under {SRC}")
    if len(rels) > 128:
        sys.exit("more than 128 releases: widen kv_vllm_flag.releases")
    per = {r: serve_options(os.path.join(SRC, r)) for r in rels}
    quant = [quant_methods(os.path.join(SRC, r)) for r in rels]
    kvd = [kv_dtypes(os.path.join(SRC, r)) for r in rels]
    qarg = [quant_checked_by_argparse(os.path.join(SRC, r)) for r in rels]
    qfile = [quant_needs_file(os.path.join(SRC, r)) for r in rels]
    names = sorted({k for r in rels for k in per[r]})
    lines = []
    w = lines.append
    w("/* GENERATED by scripts/gen_vllm_flags.py from the argument parsers of the vLLM")
    w(" * releases below (engine/arg_utils.py, the frontend's cli_args.py and")
    w(" * entrypoints/cli/serve.py of each wheel). Do not edit: rerun the script. */")
    w('#include "kv_vllm_flags.h"')
    w("")
    w(f"const int kv_vllm_num_releases = {len(rels)};")
    w("const char *const kv_vllm_releases[] = {")
    for i in range(0, len(rels), 8):
        w("    " + ", ".join(c_str(r) for r in rels[i:i + 8]) + ",")
    w("};")
    w("")
    w("/* name, short forms and other spellings (space-separated), takes a value")
    w(" * (KV_VLLM_NARGS_*), has a --no- form (both in the newest release that has")
    w(" * it), releases (bit i = kv_vllm_releases[i]), and the shape in each release")
    w(" * (one character per release: '-' absent, else nargs + 4 if it has a --no-")
    w(" * form); the comment gives the spans. */")
    w("const kv_vllm_flag kv_vllm_flags[] = {")
    for n in names:
        have = [i for i, r in enumerate(rels) if n in per[r]]
        newest = per[rels[have[-1]]][n]
        aliases = sorted(set().union(*(per[rels[i]][n]["aliases"] for i in have)))
        lo = sum(1 << i for i in have if i < 64)
        hi = sum(1 << (i - 64) for i in have if i >= 64)
        spans, start = [], None
        for i in range(len(rels) + 1):
            on = i in have
            if on and start is None:
                start = i
            if not on and start is not None:
                spans.append(rels[start] + ("" if i - 1 == start else "-" + rels[i - 1]))
                start = None
        shape = "".join(str(per[r][n]["nargs"] + 4 * per[r][n]["neg"]) if n in per[r] else "-" for r in rels)
        w(f"    {{{c_str(n)}, {c_str(' '.join(aliases))}, {newest['nargs']}, {newest['neg']}, "
          f"{{0x{lo:016x}ull, 0x{hi:016x}ull}}, {c_str(shape)}}}, /* {', '.join(spans)} */")
    w("};")
    w(f"const int kv_vllm_num_flags = {len(names)};")
    w("")
    w("/* Per release: the --quantization methods (QuantizationMethods /")
    w(" * QUANTIZATION_METHODS of model_executor/layers/quantization/__init__.py)")
    w(" * and the --kv-cache-dtype values (CacheDType of config/cache.py, or the")
    w(" * option's choices in engine/arg_utils.py), '|'-separated. */")
    w("const char *const kv_vllm_quantization_methods[] = {")
    for r, q in zip(rels, quant):
        w(f"    /* {r} */ {c_str('|'.join(q))},")
    w("};")
    w("/* Per release: 1 if argparse checks --quantization against the list")
    w(" * (choices), 0 if config/model.py _verify_quantization does (\"Unknown")
    w(" * quantization method\"). */")
    w("const unsigned char kv_vllm_quantization_argparse[] = {")
    for i in range(0, len(rels), 16):
        w("    " + ", ".join(str(q) for q in qarg[i:i + 16]) + ",")
    w("};")
    w("/* Per release: the --quantization methods whose config is read from a file")
    w(" * beside config.json when the checkpoint has none (get_config_filenames of")
    w(" * the method's config class lists one; model_loader/weight_utils.py")
    w(" * get_quant_config: \"Cannot find the config file for X\"), '|'-separated. */")
    w("const char *const kv_vllm_quantization_need_file[] = {")
    for r, q in zip(rels, qfile):
        w(f"    /* {r} */ {c_str('|'.join(q))},")
    w("};")
    w("const char *const kv_vllm_kv_cache_dtypes[] = {")
    for r, q in zip(rels, kvd):
        w(f"    /* {r} */ {c_str('|'.join(q))},")
    w("};")
    open(OUT, "w").write("\n".join(lines) + "\n")
    print(f"{OUT}: {len(names)} options over {len(rels)} releases ({rels[0]} .. {rels[-1]})")


if __name__ == "__main__":
    main()
