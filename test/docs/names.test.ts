/**
 * One word per thing (docs/architecture.md "Names"): domain files follow one grammar,
 * `<name>.<role>.ts` (with `.web`/`.backend` before the role for the two sides of one domain), and
 * no two exported functions of src/ share a name, so a name found in a stack trace or a search
 * means one thing.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const ROLES = ['service', 'repo', 'schemas', 'types', 'contract', 'client', 'driver', 'connector', 'rules'] as const;
/** the channels domain's contract keeps the name its two connectors (telegram, discord) import it by */
const NAMED_CONTRACTS = new Set(['src/domains/channels/connector.ts']);
const DOMAIN_FILE = new RegExp(`^[a-z0-9-]+(\\.(web|backend))?\\.(${ROLES.join('|')})\\.ts$`);

function walk(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const rel = join(dir, name);
    if (statSync(join(ROOT, rel)).isDirectory()) return walk(rel);
    return name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.gen.ts') ? [rel] : [];
  });
}

describe('names (docs/architecture.md "Names")', () => {
  it(`every domain file is index.ts or <name>.<role>.ts, the role one of: ${ROLES.join(', ')}`, () => {
    const bad = walk('src/domains').filter((f) => {
      const base = f.slice(f.lastIndexOf('/') + 1);
      return base !== 'index.ts' && !DOMAIN_FILE.test(base) && !NAMED_CONTRACTS.has(f);
    });
    expect(bad).toEqual([]);
  });

  it('a front door is the only index.ts of a domain (one per folder directly under src/domains)', () => {
    const bad = walk('src/domains').filter((f) => f.endsWith('/index.ts') && !/^src\/domains\/[^/]+\/index\.ts$/.test(f));
    expect(bad).toEqual([]);
  });

  it('no two exported functions of src/ share a name', () => {
    const where = new Map<string, Set<string>>();
    for (const f of walk('src')) {
      const text = readFileSync(join(ROOT, f), 'utf8');
      for (const m of text.matchAll(/^export (?:async )?function\*? (\w+)|^export const (\w+)\s*=\s*(?:async\s*)?(?:\(|<|\w+\s*=>)/gm)) {
        const name = (m[1] ?? m[2])!;
        if (!where.has(name)) where.set(name, new Set());
        where.get(name)!.add(relative(ROOT, join(ROOT, f)));
      }
    }
    const shared = [...where].filter(([, files]) => files.size > 1).map(([name, files]) => `${name}: ${[...files].join(', ')}`);
    expect(shared).toEqual([]);
  });
});
