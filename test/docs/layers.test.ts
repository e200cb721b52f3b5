/**
 * The layer rules of docs/architecture.md ("Layers and what each may import") as data, held
 * against every import of `src/` and `dashboard/src/` (type imports included): an import a rule
 * forbids, an import into another domain that passes its front door (`src/domains/<d>/index.ts`),
 * or a loop between domain folders fails with the rule's name.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

/** Where a file sits, as the rules name it. */
type Layer =
  | 'main'
  | 'platform'
  | 'http/web'
  | 'http/backend'
  | 'http/shared'
  | 'domains'
  | 'workers'
  | 'db'
  | 'lib'
  | 'config'
  | 'runtime'
  | 'dashboard';

function layerOf(file: string): Layer | undefined {
  if (file === 'src/main.ts') return 'main';
  if (file === 'src/platform.ts' || file.startsWith('src/platform/')) return 'platform';
  for (const l of ['http/web', 'http/backend', 'http/shared', 'domains', 'workers', 'db', 'lib', 'config', 'runtime'] as const) {
    if (file.startsWith(`src/${l}/`)) return l;
  }
  if (file.startsWith('dashboard/src/')) return 'dashboard';
  return undefined;
}

/**
 * What each layer may import (its own layer always; inside `domains`, other domains through
 * their front door only). Files named in EXCEPTIONS are allowed to each of the layers named
 * there, with the reason in docs/architecture.md.
 */
const MAY_IMPORT: Record<Layer, readonly Layer[]> = {
  main: ['platform', 'http/web', 'http/backend', 'http/shared', 'domains', 'workers', 'db', 'lib', 'config'],
  platform: ['http/web', 'http/backend', 'http/shared', 'domains', 'workers', 'db', 'lib', 'config'],
  'http/web': ['http/shared', 'domains', 'lib', 'config'],
  'http/backend': ['http/shared', 'domains', 'lib', 'config'],
  'http/shared': ['domains', 'lib', 'config'],
  domains: ['db', 'lib', 'config'],
  workers: ['domains', 'lib', 'config'],
  db: ['lib', 'config'],
  config: ['lib'],
  lib: [],
  runtime: ['lib', 'config'],
  dashboard: [],
};

/** Single files a layer may import outside its list (docs/architecture.md "Layers and what each may import"). */
const EXCEPTIONS: { from: Layer; to: string; why: string }[] = [
  { from: 'http/shared', to: 'src/db/errors.ts', why: 'the one error handler answers 503 for a database that is down' },
  { from: 'dashboard', to: 'src/config/limits.ts', why: 'the limits the pages show and check' },
  { from: 'dashboard', to: 'src/lib/money.ts', why: 'micro-dollars as the wallet page shows them' },
  { from: 'dashboard', to: 'src/lib/prices.ts', why: 'the plugin prices the wallet page lists' },
];

function walk(dir: string): string[] {
  const abs = join(ROOT, dir);
  return readdirSync(abs).flatMap((name) => {
    const rel = join(dir, name);
    if (statSync(join(ROOT, rel)).isDirectory()) return name === 'node_modules' || name === 'dist' ? [] : walk(rel);
    return /\.(ts|tsx)$/.test(name) && !/\.(test|gen)\.ts$/.test(name) ? [rel] : [];
  });
}

const FILES = [...walk('src'), ...walk('dashboard/src')];

/** Relative imports of a file (static, type-only, re-exports and dynamic), resolved to repository paths. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const specs = [
    ...text.matchAll(/^\s*(?:import|export)\b[^'"]*?\bfrom\s*['"]([^'"]+)['"]/gm),
    ...text.matchAll(/^\s*import\s*['"]([^'"]+)['"]/gm),
    ...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g),
  ].map((m) => m[1]!);
  return specs.filter((s) => s.startsWith('.')).map((s) => relative(ROOT, resolve(join(ROOT, dirname(file)), s)));
}

const domainOf = (file: string) => /^src\/domains\/([^/]+)\//.exec(file)?.[1];
const isFrontDoor = (file: string) => /^src\/domains\/[^/]+\/index\.ts$/.test(file);

type Violation = { rule: string; from: string; to: string };

function violations(): Violation[] {
  const out: Violation[] = [];
  for (const from of FILES) {
    const fl = layerOf(from);
    if (!fl) continue;
    for (const to of importsOf(from)) {
      const tl = layerOf(to);
      if (!tl) {
        out.push({ rule: 'imports stay inside src/ (and the dashboard inside dashboard/src/)', from, to });
        continue;
      }
      const fd = domainOf(from);
      const td = domainOf(to);
      if (tl === 'domains' && td !== fd && !isFrontDoor(to)) {
        out.push({ rule: `another domain is reached through its front door (src/domains/${td}/index.ts)`, from, to });
        continue;
      }
      if (tl === fl) continue;
      if (MAY_IMPORT[fl].includes(tl)) continue;
      if (EXCEPTIONS.some((e) => e.from === fl && e.to === to)) continue;
      out.push({
        rule: `${fl} may import ${[...MAY_IMPORT[fl], ...EXCEPTIONS.filter((e) => e.from === fl).map((e) => e.to)].join(', ') || 'nothing of ours'}`,
        from,
        to,
      });
    }
  }
  return out;
}

/** The domain folders each domain imports (type imports included). */
function domainGraph(): Map<string, Set<string>> {
  const g = new Map<string, Set<string>>();
  for (const from of FILES) {
    const fd = domainOf(from);
    if (!fd) continue;
    if (!g.has(fd)) g.set(fd, new Set());
    for (const to of importsOf(from)) {
      const td = domainOf(to);
      if (td && td !== fd) g.get(fd)!.add(td);
    }
  }
  return g;
}

/** Every loop between domain folders, as `a → b → a`. */
function loops(g: Map<string, Set<string>>): string[] {
  const found = new Set<string>();
  const visit = (start: string, at: string, path: string[]) => {
    for (const next of g.get(at) ?? []) {
      if (next === start) {
        const cycle = [...path, next];
        // one spelling per loop: rotated to start at its smallest name
        const body = cycle.slice(0, -1);
        const i = body.indexOf([...body].sort()[0]!);
        const rotated = [...body.slice(i), ...body.slice(0, i)];
        found.add([...rotated, rotated[0]].join(' → '));
      } else if (!path.includes(next) && path.length < 8) visit(start, next, [...path, next]);
    }
  };
  for (const d of g.keys()) visit(d, d, [d]);
  return [...found].sort();
}

describe('layers (docs/architecture.md "Layers and what each may import")', () => {
  it('every file is in a layer the rules name', () => {
    expect(FILES.filter((f) => !layerOf(f))).toEqual([]);
  });

  it('no import breaks a layer rule or passes another domain’s front door', () => {
    const bad = violations().map((v) => `${v.rule}: ${v.from} → ${v.to}`);
    expect(bad).toEqual([]);
  });

  it('every domain folder has a front door (index.ts)', () => {
    const domains = readdirSync(join(ROOT, 'src/domains')).filter((d) => statSync(join(ROOT, 'src/domains', d)).isDirectory());
    expect(domains.filter((d) => !FILES.includes(`src/domains/${d}/index.ts`))).toEqual([]);
  });

  it('no loop between domain folders, type imports included', () => {
    expect(loops(domainGraph())).toEqual([]);
  });
});
