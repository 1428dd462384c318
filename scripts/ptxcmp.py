#!/usr/bin/env python3
"""Per-kernel PTX comparison of two builds' module directories (the OUT_DIR of the
radio-kernels build script: <family>_<arch>.ptx). A kernel's text is its .entry body plus the
bodies of every .func it calls (transitively), normalised: comments dropped, basic-block and
temp labels renumbered away, anon hashes dropped, Rust mangled names reduced to their last
path segment (so moving a function between modules does not count as a change).
Kernels that differ only in the numbering of virtual registers print "same up to register
numbering". Use it to show that moving device code left the generated code alone: copy
OUT_DIR's *_sm*.ptx before the change, build, and compare with the new OUT_DIR
(target/<profile>/build/radio-kernels-*/out, the newest).
Usage: ptxcmp.py BASE_DIR NEW_DIR   -> one line per kernel: same / DIFFERENT / removed / added."""
import re, sys, glob, os

MANGLED = re.compile(r'_ZN((?:\d+[A-Za-z0-9_$.]+?)+)17h[0-9a-f]{16}E')

def last_segment(m):
    s = m.group(1); segs = []; i = 0
    while i < len(s):
        j = i
        while s[j].isdigit(): j += 1
        n = int(s[i:j]); segs.append(s[j:j + n]); i = j + n
    return 'FN_' + segs[-1]

def blocks(text):
    """name -> (kind, lines) for every .entry and .func with a body."""
    out = {}; cur = None; depth = 0; buf = []
    for line in text.split('\n'):
        t = line.strip()
        if cur is None and depth == 0:
            m = re.match(r'(?:\.visible |\.weak |\.extern )*\.(entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z0-9_$.]+)', t)
            if m:
                cur = (m.group(1), m.group(2)); buf = []
        code = line.split('//')[0]
        if cur is not None:
            buf.append(line)
            if ';' in code and depth == 0 and '{' not in code and cur[0] == 'func' and code.strip().endswith(';'):
                cur = None  # a declaration
                continue
        depth += code.count('{') - code.count('}')
        if cur is not None and depth == 0 and code.strip() == '}':
            out[cur[1]] = (cur[0], buf); cur = None
    return out

def norm(lines):
    s = '\n'.join(l.split('//')[0].rstrip() for l in lines)
    s = re.sub(r'\$L__BB\d+_\d+', '$L__BB', s)
    s = re.sub(r'\$L__tmp\d+', '$L__tmp', s)
    s = re.sub(r'anon_\$_[0-9a-f]+_\$_\d+', 'anon', s)
    s = MANGLED.sub(last_segment, s)
    return s

def kernels(path):
    b = blocks(open(path).read())
    funcs = {k: v[1] for k, v in b.items() if v[0] == 'func'}
    out = {}
    for name, (kind, lines) in b.items():
        if kind != 'entry': continue
        seen = []; todo = [lines]
        text = [norm(lines)]
        while todo:
            body = '\n'.join(todo.pop())
            for f in funcs:
                if f not in seen and re.search(r'\b' + re.escape(f) + r'\b', body) and f != name:
                    seen.append(f); todo.append(funcs[f])
        for f in sorted(seen, key=lambda f: MANGLED.sub(last_segment, f)):
            text.append(norm(funcs[f]))
        out[name] = '\n'.join(text)
    return out

def load(d):
    out = {}
    for p in glob.glob(os.path.join(d, '*_sm*.ptx')):
        if 'radio_kernels' in p: continue
        arch = os.path.basename(p)[:-4].rsplit('_', 1)[1]
        for k, v in kernels(p).items():
            out[(k, arch)] = v
    return out

def renumber(text):
    """Virtual registers renamed in order of first appearance (per register class)."""
    seen = {}
    def sub(m):
        key = m.group(0)
        if key not in seen:
            cls = m.group(1)
            seen[key] = f'%{cls}#{sum(1 for k in seen if k.startswith("%" + cls) and k[len(cls)+1:].isdigit())}'
        return seen[key]
    body = re.sub(r'\.reg \.[a-z0-9]+ \s*%[a-z]+<\d+>;', '', text)
    return re.sub(r'%([a-z]+)(\d+)\b', sub, body)

a, b = load(sys.argv[1]), load(sys.argv[2])
same = diff = 0
for k in sorted(set(a) | set(b)):
    if k not in b: print(f'{k[0]} ({k[1]}): removed')
    elif k not in a: print(f'{k[0]} ({k[1]}): added')
    elif a[k] == b[k]: same += 1; print(f'{k[0]} ({k[1]}): same')
    elif renumber(a[k]) == renumber(b[k]): same += 1; print(f'{k[0]} ({k[1]}): same up to register numbering')
    else: diff += 1; print(f'{k[0]} ({k[1]}): DIFFERENT')
print(f'summary: {same} same, {diff} different, {len(set(a)-set(b))} removed, {len(set(b)-set(a))} added', file=sys.stderr)
