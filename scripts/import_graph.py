"""The file-level import graph of a crate's src/, and its circles.

An edge A -> B where file A names a path (`use`, `pub use`, or an inline
`crate::`/`super::` path) that resolves into file B; doc comments, line
comments and `$crate` paths in macros are ignored, and a macro exported at
the root counts as its defining file. Prints the edges, then on stderr each
circle (a strongly connected set of files). Usage:

    python3 scripts/import_graph.py kv-core/src          # edges, then circles
    python3 scripts/import_graph.py --check kv-core/src  # circles only; exit 1 on any

CI runs the check on kv-core, kv-engines, kv-derive and kv-cli: each file's
imports point down (issue #27).
"""
import os, re, sys
check = '--check' in sys.argv[1:]
root = [a for a in sys.argv[1:] if a != '--check'][0]
files = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            p = os.path.relpath(os.path.join(d, f), root)
            m = p[:-3]
            if m == 'lib': mod = ()
            elif m.endswith('/mod'): mod = tuple(m.split('/')[:-1])
            else: mod = tuple(m.split('/'))
            # kv-core loads private/mod.rs as `__private_v0_1` (#[path]).
            if mod and mod[0] == 'private': mod = ('__private_v0_1',) + mod[1:]
            files[mod] = p
def file_of(path):
    # longest prefix that is a file module
    for n in range(len(path), -1, -1):
        if tuple(path[:n]) in files: return tuple(path[:n])
macros = {}
for mod, p in files.items():
    for m in re.finditer(r'macro_rules! (\w+)', open(os.path.join(root, p)).read()):
        macros[m.group(1)] = mod
def expand(text):
    # `use a::{b, c::{d}};` -> one path per line, so each name resolves alone
    def rep(m):
        head, body = m.group(2), m.group(3)
        items, depth, cur = [], 0, ''
        for ch in body:
            depth += ch == '{'; depth -= ch == '}'
            if ch == ',' and depth == 0: items.append(cur.strip()); cur = ''
            else: cur += ch
        if cur.strip(): items.append(cur.strip())
        return ''.join(f'{m.group(1)}use {head}::{it};\n' for it in items)
    prev = None
    while prev != text:
        prev = text
        text = re.sub(r'(?m)^([ \t]*(?:pub(?:\([a-z]+\))? )?)use ([\w:]+)::\{((?:[^{}]|\{[^{}]*\})*)\};[ \t]*\n', rep, text)
    return text
edges = {}
for mod, p in files.items():
    out = set()
    depth_mod = mod  # module of the code at file level
    stack = []  # inline mod nesting by indentation
    for line in expand(open(os.path.join(root, p)).read()).splitlines(True):
        s = line.strip()
        if s.startswith('//') or s.startswith('#['): continue
        ind = len(line) - len(line.lstrip())
        m = re.match(r'(pub(\([a-z]+\))? )?mod (\w+) \{', s)
        while stack and stack[-1][0] >= ind and s: stack.pop()
        cur = mod + tuple(x[1] for x in stack)
        if m: stack.append((ind, m.group(3))); continue
        code = re.sub(r'"([^"\\]|\\.)*"', '""', line)
        for m in re.finditer(r'(?<![\w$])((?:crate|super|self)(?:::\w+)+)', code):
            parts = m.group(1).split('::')
            if parts[0] == 'crate': base, rest = (), parts[1:]
            else:
                base = cur
                while parts and parts[0] in ('super', 'self'):
                    if parts[0] == 'super': base = base[:-1]
                    parts = parts[1:]
                rest = parts
            t = macros.get(rest[0]) if rest and rest[0] in macros else file_of(list(base) + rest)
            if t is not None and t != mod: out.add(t)
        # plain `use child::..` / `pub use child::..` in a parent file
        m = re.match(r'(pub(\([a-z]+\))? )?use (\w+)::', s)
        if m and m.group(3) not in ('crate', 'super', 'self', 'std', 'core', 'serde', 'serde_json', 'similar', 'plotters', 'log', 'inventory'):
            t = file_of(list(cur) + [m.group(3)])
            if t is not None and t != mod: out.add(t)
    edges[mod] = out
name = lambda m: files[m]
if not check:
    for m in sorted(edges, key=name):
        for t in sorted(edges[m], key=name):
            print(f'{name(m)} -> {name(t)}')
# cycles: strongly connected components (Tarjan)
idx, low, on, st, sccs, i = {}, {}, set(), [], [], [0]
def sc(v):
    idx[v] = low[v] = i[0]; i[0] += 1; st.append(v); on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        c = []
        while True:
            w = st.pop(); on.discard(w); c.append(w)
            if w == v: break
        if len(c) > 1: sccs.append(c)
sys.setrecursionlimit(10000)
for v in edges:
    if v not in idx: sc(v)
print(f'# {root}: cycles:', len(sccs), file=sys.stderr)
for c in sccs:
    print('#  ', sorted(name(x) for x in c), file=sys.stderr)
if check and sccs:
    sys.exit(1)
