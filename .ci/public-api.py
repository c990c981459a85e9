#!/usr/bin/env python3
"""Lists the public API of crates from their rustdoc JSON, one item per line, sorted.

Usage: public-api.py CRATE.json...

Every item a user can name is listed at each public path it has (re-exports included): modules,
types with their public fields and variants, traits with their items, functions and methods
with their signatures, constants, statics, macros, and every impl of a trait for a listed type
or of a listed trait (blanket impls excepted). Items hidden from the docs (`#[doc(hidden)]`, on
the item, on a re-export or on anything around it) are listed too, each line starting with
`#[doc(hidden)]`, so that a hidden-but-public item shows in review. Paths in signatures are the
items' public paths where they have one, else where they are defined (a private path there is
a private type in a public signature).
"""

import json
import sys

# Traits whose impls the compiler writes and whose set changes with the toolchain (unstable,
# internal to derives and auto traits): not part of what a user can rely on.
COMPILER_INTERNAL = {
    "core::clone::TrivialClone",
    "core::marker::Freeze",
    "core::marker::StructuralPartialEq",
    "core::marker::UnsafeUnpin",
}


def first(d):
    """The one (key, value) of a rustdoc JSON enum value."""
    if isinstance(d, str):
        return d, None
    return next(iter(d.items()))


class Crate:
    def __init__(self, doc, public):
        self.doc = doc
        self.index = doc["index"]
        self.paths = doc["paths"]
        # Definition path (as `paths` gives it) -> the shortest public path, over every crate
        # listed: another crate's item is named by its public path too.
        self.public = public
        self.entries = []  # (path, id, hidden)
        self.lines = set()

    # ---- The walk: every public path ----

    def item(self, item_id):
        return self.index.get(str(item_id))

    @staticmethod
    def is_hidden(item):
        return "#[doc(hidden)]" in json.dumps(item.get("attrs", []))

    def walk(self):
        root = self.item(self.doc["root"])
        self.visit(root["id"], [root["name"]], False)
        for path, item_id, _ in self.entries:
            defined = self.defined_at(item_id)
            if defined is None:
                continue
            name = "::".join(path)
            known = self.public.get(defined)
            if known is None or (len(name), name) < (len(known), known):
                self.public[defined] = name

    def defined_at(self, item_id):
        known = self.paths.get(str(item_id)) if item_id is not None else None
        return "::".join(known["path"]) if known is not None else None

    def visit(self, item_id, path, hidden):
        item = self.item(item_id)
        if item is None:
            return
        hidden = hidden or self.is_hidden(item)
        self.entries.append((path, item_id, hidden))
        kind, inner = first(item["inner"])
        if kind == "module":
            self.visit_children(inner["items"], path, hidden)

    def visit_children(self, children, path, hidden):
        for child_id in children:
            child = self.item(child_id)
            if child is None or child.get("visibility") != "public":
                continue
            kind, inner = first(child["inner"])
            if kind != "use":
                self.visit(child_id, path + [child["name"]], hidden)
                continue
            use_hidden = hidden or self.is_hidden(child)
            target = self.item(inner["id"]) if inner["id"] is not None else None
            if target is None:
                # An item of another crate, listed in its own crate's API.
                glob = "::*" if inner["is_glob"] else ""
                line = f"pub use {inner['source']}{glob} as {'::'.join(path)}::{inner['name']}"
                self.entries.append((path + [inner["name"]], None, use_hidden))
                self.emit(path + [inner["name"]], use_hidden, line)
            elif inner["is_glob"]:
                self.visit_children(first(target["inner"])[1]["items"], path, use_hidden)
            else:
                self.visit(inner["id"], path + [inner["name"]], use_hidden)

    # ---- Rendering ----

    def emit(self, path, hidden, text):
        marker = "#[doc(hidden)] " if hidden else ""
        self.lines.add(("::".join(path), marker + text))

    def path_of(self, item_id, written):
        defined = self.defined_at(item_id)
        if defined is None:
            return written
        return self.public.get(defined, defined)

    def fmt_path(self, p):
        return self.path_of(p["id"], p["path"]) + self.fmt_args(p.get("args"))

    def fmt_args(self, args):
        if not args:
            return ""
        kind, inner = first(args)
        if kind == "parenthesized":
            out = f" -> {self.fmt_type(inner['output'])}" if inner["output"] else ""
            return "(" + ", ".join(self.fmt_type(t) for t in inner["inputs"]) + ")" + out
        if kind != "angle_bracketed":
            return f"({kind})"
        parts = [self.fmt_arg(a) for a in inner["args"]]
        for c in inner["constraints"]:
            name = c["name"] + self.fmt_args(c.get("args"))
            bkind, binding = first(c["binding"])
            if bkind == "equality":
                parts.append(f"{name} = {self.fmt_term(binding)}")
            else:
                parts.append(f"{name}: {self.fmt_bounds(binding)}")
        return "<" + ", ".join(parts) + ">" if parts else ""

    def fmt_arg(self, arg):
        kind, inner = first(arg)
        if kind == "lifetime":
            return inner
        if kind == "type":
            return self.fmt_type(inner)
        if kind == "const":
            return inner.get("expr") or str(inner.get("value"))
        return "_"

    def fmt_term(self, term):
        kind, inner = first(term)
        return self.fmt_type(inner) if kind == "type" else inner.get("expr", "")

    def fmt_type(self, t):
        if t is None:
            return "()"
        kind, v = first(t)
        if kind == "resolved_path":
            return self.fmt_path(v)
        if kind in ("generic", "primitive"):
            return v
        if kind == "borrowed_ref":
            lifetime = f"{v['lifetime']} " if v["lifetime"] else ""
            mutable = "mut " if v["is_mutable"] else ""
            return f"&{lifetime}{mutable}{self.fmt_type(v['type'])}"
        if kind == "raw_pointer":
            return ("*mut " if v["is_mutable"] else "*const ") + self.fmt_type(v["type"])
        if kind == "slice":
            return f"[{self.fmt_type(v)}]"
        if kind == "array":
            return f"[{self.fmt_type(v['type'])}; {v['len']}]"
        if kind == "tuple":
            inner = ", ".join(self.fmt_type(x) for x in v)
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        if kind == "qualified_path":
            trait = f" as {self.fmt_path(v['trait'])}" if v.get("trait") else ""
            return f"<{self.fmt_type(v['self_type'])}{trait}>::{v['name']}{self.fmt_args(v['args'])}"
        if kind == "impl_trait":
            return "impl " + self.fmt_bounds(v)
        if kind == "dyn_trait":
            traits = [self.fmt_poly(p) for p in v["traits"]]
            if v.get("lifetime"):
                traits.append(v["lifetime"])
            return "dyn " + " + ".join(traits)
        if kind == "function_pointer":
            return self.fmt_sig("fn", v["sig"], None)
        if kind == "infer":
            return "_"
        return f"<{kind}>"

    def fmt_poly(self, p):
        binder = self.fmt_binder(p.get("generic_params", []))
        return binder + self.fmt_path(p["trait"])

    def fmt_binder(self, params):
        return f"for<{', '.join(self.fmt_param(x) for x in params)}> " if params else ""

    def fmt_bounds(self, bounds):
        out = []
        for b in bounds:
            kind, v = first(b)
            if kind == "trait_bound":
                modifier = {"maybe": "?", "maybe_const": "~const "}.get(v["modifier"], "")
                out.append(self.fmt_binder(v["generic_params"]) + modifier + self.fmt_path(v["trait"]))
            elif kind == "outlives":
                out.append(v)
            else:
                out.append(f"use<{', '.join(str(x) for x in v)}>")
        return " + ".join(out)

    def fmt_param(self, p):
        kind, v = first(p["kind"])
        if kind == "lifetime":
            return p["name"] + (": " + " + ".join(v["outlives"]) if v["outlives"] else "")
        if kind == "type":
            bounds = f": {self.fmt_bounds(v['bounds'])}" if v["bounds"] else ""
            default = f" = {self.fmt_type(v['default'])}" if v.get("default") else ""
            return p["name"] + bounds + default
        default = f" = {v['default']}" if v.get("default") else ""
        return f"const {p['name']}: {self.fmt_type(v['type'])}{default}"

    def fmt_generics(self, g):
        params = [p for p in g["params"] if not first(p["kind"])[1].get("is_synthetic", False)]
        return "<" + ", ".join(self.fmt_param(p) for p in params) + ">" if params else ""

    def fmt_where(self, g):
        preds = []
        for w in g["where_predicates"]:
            kind, v = first(w)
            if kind == "bound_predicate":
                binder = self.fmt_binder(v.get("generic_params", []))
                preds.append(f"{binder}{self.fmt_type(v['type'])}: {self.fmt_bounds(v['bounds'])}")
            elif kind == "lifetime_predicate":
                preds.append(f"{v['lifetime']}: {' + '.join(v['outlives'])}")
            else:
                preds.append(f"{self.fmt_type(v['lhs'])} = {self.fmt_term(v['rhs'])}")
        return " where " + ", ".join(preds) if preds else ""

    def fmt_sig(self, name, sig, generics):
        params = []
        for arg_name, t in sig["inputs"]:
            if arg_name == "self":
                params.append(self.fmt_self(t))
            elif arg_name == "_":
                params.append(self.fmt_type(t))
            else:
                params.append(f"{arg_name}: {self.fmt_type(t)}")
        if sig.get("is_c_variadic"):
            params.append("...")
        out = f" -> {self.fmt_type(sig['output'])}" if sig.get("output") else ""
        g = self.fmt_generics(generics) if generics else ""
        where = self.fmt_where(generics) if generics else ""
        return f"{name}{g}({', '.join(params)}){out}{where}"

    def fmt_self(self, t):
        kind, v = first(t)
        if kind == "generic" and v == "Self":
            return "self"
        if kind == "borrowed_ref" and v["type"] == {"generic": "Self"}:
            lifetime = f"{v['lifetime']} " if v["lifetime"] else ""
            return f"&{lifetime}{'mut ' if v['is_mutable'] else ''}self"
        return f"self: {self.fmt_type(t)}"

    def fmt_fn(self, path, inner):
        h = inner["header"]
        quals = "".join(
            q for q, on in [("const ", h["is_const"]), ("async ", h["is_async"]), ("unsafe ", h["is_unsafe"])] if on
        )
        abi = "" if h["abi"] == "Rust" else f'extern "{first(h["abi"])[0]}" '
        return f"pub {quals}{abi}fn " + self.fmt_sig(path, inner["sig"], inner["generics"])

    # ---- Items ----

    def render(self):
        impls_done = set()
        for path, item_id, hidden in self.entries:
            if item_id is not None:
                self.render_item(item_id, path, hidden, impls_done)

    def render_item(self, item_id, path, hidden, impls_done):
        item = self.item(item_id)
        kind, v = first(item["inner"])
        name = "::".join(path)
        emit = lambda p, text, h=hidden: self.emit(p, h, text)  # noqa: E731
        if kind == "module":
            emit(path, f"pub mod {name}")
        elif kind == "function":
            emit(path, self.fmt_fn(name, v))
        elif kind == "constant":
            emit(path, f"pub const {name}: {self.fmt_type(v['type'])} = {v['const']['expr']}")
        elif kind == "static":
            mutable = "mut " if v["is_mutable"] else ""
            emit(path, f"pub static {mutable}{name}: {self.fmt_type(v['type'])}")
        elif kind == "type_alias":
            g = v["generics"]
            emit(path, f"pub type {name}{self.fmt_generics(g)}{self.fmt_where(g)} = {self.fmt_type(v['type'])}")
        elif kind in ("macro", "proc_macro"):
            emit(path, f"macro {name}!")
        elif kind in ("struct", "union"):
            g = v["generics"]
            emit(path, f"pub {kind} {name}{self.fmt_generics(g)}{self.fmt_where(g)}")
            fields = v["fields"] if kind == "union" else v["kind"]
            fkind, fv = first(fields) if not isinstance(fields, list) else ("plain", {"fields": fields})
            if fkind == "plain":
                self.render_fields(path, fv["fields"], hidden)
            elif fkind == "tuple":
                for i, field_id in enumerate(fv):
                    if field_id is not None:
                        self.render_field(path + [str(i)], field_id, hidden)
            self.render_impls(v["impls"], name, hidden, impls_done)
        elif kind == "enum":
            g = v["generics"]
            emit(path, f"pub enum {name}{self.fmt_generics(g)}{self.fmt_where(g)}")
            for variant_id in v["variants"]:
                self.render_variant(path, variant_id, hidden)
            self.render_impls(v["impls"], name, hidden, impls_done)
        elif kind == "trait":
            g = v["generics"]
            unsafe = "unsafe " if v["is_unsafe"] else ""
            bounds = f": {self.fmt_bounds(v['bounds'])}" if v["bounds"] else ""
            emit(path, f"pub {unsafe}trait {name}{self.fmt_generics(g)}{bounds}{self.fmt_where(g)}")
            for assoc_id in v["items"]:
                self.render_assoc(path, assoc_id, hidden)
            self.render_impls(v["implementations"], name, hidden, impls_done)
        else:
            emit(path, f"pub {kind} {name}")

    def render_fields(self, path, field_ids, hidden):
        for field_id in field_ids:
            field = self.item(field_id)
            if field is not None and field.get("visibility") == "public":
                self.render_field(path + [field["name"]], field_id, hidden)

    def render_field(self, path, field_id, hidden):
        field = self.item(field_id)
        hidden = hidden or self.is_hidden(field)
        self.emit(path, hidden, f"pub field {'::'.join(path)}: {self.fmt_type(field['inner']['struct_field'])}")

    def render_variant(self, path, variant_id, hidden):
        variant = self.item(variant_id)
        vpath = path + [variant["name"]]
        hidden = hidden or self.is_hidden(variant)
        v = variant["inner"]["variant"]
        kind, inner = first(v["kind"])
        shape = ""
        if kind == "tuple":
            types = [self.fmt_type(self.item(f)["inner"]["struct_field"]) if f is not None else "_" for f in inner]
            shape = f"({', '.join(types)})"
        elif kind == "struct":
            self.render_fields(vpath, inner["fields"], hidden)
        disc = f" = {v['discriminant']['expr']}" if v.get("discriminant") else ""
        self.emit(vpath, hidden, f"pub variant {'::'.join(vpath)}{shape}{disc}")

    def render_assoc(self, path, assoc_id, hidden):
        assoc = self.item(assoc_id)
        apath = path + [assoc["name"]]
        name = "::".join(apath)
        hidden = hidden or self.is_hidden(assoc)
        kind, v = first(assoc["inner"])
        if kind == "function":
            provided = " { .. }" if v["has_body"] else ""
            self.emit(apath, hidden, self.fmt_fn(name, v) + provided)
        elif kind == "assoc_const":
            default = f" = {v['value']}" if v.get("value") else ""
            self.emit(apath, hidden, f"pub const {name}: {self.fmt_type(v['type'])}{default}")
        elif kind == "assoc_type":
            g = v["generics"]
            bounds = f": {self.fmt_bounds(v['bounds'])}" if v["bounds"] else ""
            default = f" = {self.fmt_type(v['type'])}" if v.get("type") else ""
            self.emit(apath, hidden, f"pub type {name}{self.fmt_generics(g)}{bounds}{self.fmt_where(g)}{default}")
        else:
            self.emit(apath, hidden, f"pub {kind} {name}")

    def render_impls(self, impl_ids, owner, hidden, impls_done):
        for impl_id in impl_ids:
            item = self.item(impl_id)
            if item is None:
                continue
            v = item["inner"]["impl"]
            if v["blanket_impl"] is not None:
                continue
            if v["trait"] is not None and self.path_of(v["trait"]["id"], "") in COMPILER_INTERNAL:
                continue
            impl_hidden = hidden or self.is_hidden(item)
            if v["trait"] is None:
                # Inherent: its public items at the type's path.
                for assoc_id in v["items"]:
                    assoc = self.item(assoc_id)
                    if assoc is not None and assoc.get("visibility") == "public":
                        self.render_assoc(owner.split("::"), assoc_id, impl_hidden)
                continue
            if (impl_id, owner) in impls_done:
                continue
            impls_done.add((impl_id, owner))
            g = v["generics"]
            unsafe = "unsafe " if v["is_unsafe"] else ""
            negative = "!" if v["is_negative"] else ""
            head = (
                f"{unsafe}impl{self.fmt_generics(g)} {negative}{self.fmt_path(v['trait'])} "
                f"for {self.fmt_type(v['for'])}{self.fmt_where(g)}"
            )
            self.emit(owner.split("::"), impl_hidden, head)
            for assoc_id in v["items"]:
                assoc = self.item(assoc_id)
                akind, av = first(assoc["inner"])
                if akind == "assoc_type" and av.get("type"):
                    ag = av["generics"]
                    text = f"{head} {{ type {assoc['name']}{self.fmt_generics(ag)} = {self.fmt_type(av['type'])} }}"
                    self.emit(owner.split("::"), impl_hidden, text)


# The rustdoc JSON format this lister reads (rustdoc's FORMAT_VERSION of the pinned toolchain).
FORMAT_VERSION = 57


def main():
    public = {}
    crates = []
    for name in sys.argv[1:]:
        with open(name) as f:
            doc = json.load(f)
        if doc["format_version"] != FORMAT_VERSION:
            print(
                f"public-api.py: {name} is rustdoc JSON format {doc['format_version']}, "
                f"the lister reads format {FORMAT_VERSION}: check its output and update it",
                file=sys.stderr,
            )
        crates.append(Crate(doc, public))
    for crate in crates:
        crate.walk()
    # Each line once (an impl shows under every path of its type and trait), at its first path.
    lines = {}
    for crate in crates:
        crate.render()
        for path, text in crate.lines:
            lines[text] = min(path, lines.get(text, path))
    for text in sorted(lines, key=lambda text: (lines[text], text)):
        print(text)


if __name__ == "__main__":
    main()
