/**
 * Every reference in the code and the docs resolves inside this repository (docs/architecture.md
 * "Design rules"): a reader of a fresh clone can follow each one. Outside documents (the team's
 * notes, audits, issue trackers) are named nowhere; what the code needs from them lives in docs/
 * (the design rules, the security findings N1–N30 in docs/security.md, the specification map).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const SCANNED = ['src', 'dashboard/src', 'scripts', 'bench', 'test', 'docs', 'README.md', 'package.json'];
const TEXT = /\.(ts|tsx|md|sql|sh|json|css|html)$/;

function files(path: string): string[] {
  const abs = join(ROOT, path);
  if (!existsSync(abs)) return [];
  if (statSync(abs).isFile()) return [path];
  return readdirSync(abs, { withFileTypes: true }).flatMap((e) => {
    const rel = join(path, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' ? [] : files(rel);
    return TEXT.test(e.name) && !e.name.endsWith('.gen.ts') ? [rel] : [];
  });
}

const ALL = SCANNED.flatMap(files).filter((f) => f !== relative(ROOT, import.meta.filename));
const read = (f: string) => readFileSync(join(ROOT, f), 'utf8');

/** Lines of `files` matching `pattern`, as "file:line: text". */
function hits(pattern: RegExp, within = ALL): string[] {
  const out: string[] = [];
  for (const f of within) {
    read(f)
      .split('\n')
      .forEach((line, i) => {
        if (pattern.test(line)) out.push(`${f}:${i + 1}: ${line.trim().slice(0, 160)}`);
      });
  }
  return out;
}

describe('references resolve in the repository', () => {
  it('no file names a document outside the repository or an issue number', () => {
    expect(
      hits(
        /\b(CONFIG|DESIGN|LIBRARIES)\.md\b|\.\.\/shared\/(seeds|audits|tools|issues)\b|\baudits?\/|\bissues? #?\d+\b|\baudit (N\d|item|security|20\d\d)/i,
      ),
    ).toEqual([]);
  });

  it('every design rule cited exists in docs/architecture.md', () => {
    const rules = [...read('docs/architecture.md').matchAll(/^(\d+)\. \*\*/gm)].map((m) => Number(m[1]));
    expect(rules.length).toBeGreaterThan(0);
    const bad = ALL.flatMap((f) =>
      [...read(f).matchAll(/architecture\.md(?:"?\s*\)?,?)? rules? (\d+)/g)]
        .filter((m) => !rules.includes(Number(m[1])))
        .map((m) => `${f}: rule ${m[1]}`),
    );
    expect(bad).toEqual([]);
  });

  it('every security finding cited (N1–N30) is listed in docs/security.md', () => {
    const listed = new Set([...read('docs/security.md').matchAll(/^\| (N\d+) \|/gm)].map((m) => m[1]));
    expect(listed.size).toBe(30);
    const bad = ALL.flatMap((f) =>
      [...read(f).matchAll(/\b(?:findings?|security\.md"?\)?,?) (N\d+)\b/g)].filter((m) => !listed.has(m[1]!)).map((m) => `${f}: ${m[1]}`),
    );
    expect(bad).toEqual([]);
  });

  it('every docs/*.md named exists, and every "Heading" named after it is a heading (or a bold label) there', () => {
    const headings = new Map<string, string[]>();
    const headingsOf = (doc: string) => {
      if (!headings.has(doc))
        headings.set(
          doc,
          // headings, and the bold labels that open a paragraph (**Network.**)
          [...read(doc).matchAll(/^#+ (.+)$|^(?:- )?\*\*([^*]+?)\.?\*\*/gm)].map((m) => (m[1] ?? m[2]!).trim().toLowerCase()),
        );
      return headings.get(doc)!;
    };
    const bad: string[] = [];
    for (const f of ALL) {
      for (const m of read(f).matchAll(/\b(docs\/[\w.-]+\.md)(?:\)?,? "([^"\n]+)")?/g)) {
        const doc = m[1]!;
        if (!existsSync(join(ROOT, doc))) bad.push(`${f}: ${doc} does not exist`);
        else if (m[2] && !headingsOf(doc).some((h) => h.startsWith(m[2]!.replaceAll('\\', '').toLowerCase())))
          bad.push(`${f}: ${doc} has no heading "${m[2]}"`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('every repository path the docs name in backticks exists', () => {
    const bad: string[] = [];
    for (const f of [...files('docs'), 'README.md']) {
      for (const m of read(f).matchAll(/`((?:src|test|scripts|bench|dashboard)\/[\w./-]+\.(?:ts|tsx|sql|css|md))`/g)) {
        if (!existsSync(join(ROOT, m[1]!))) bad.push(`${f}: ${m[1]}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('every section of the specification map has a one-line summary and places that exist', () => {
    const arch = read('docs/architecture.md');
    const map = arch.slice(arch.indexOf('## Specification map'));
    const rows = map
      .split('\n')
      .filter((l) => /^\| (§|dashboard)/.test(l))
      .map((l) =>
        l
          .split('|')
          .slice(1, -1)
          .map((c) => c.trim()),
      );
    expect(rows.length).toBeGreaterThan(15);
    for (const row of rows) {
      const [section, summary, where] = row;
      expect(row, `${section}: section | what it covers | where`).toHaveLength(3);
      expect(summary, `${section}: summary`).toMatch(/\S.{10,}/);
      for (const p of (where ?? '').matchAll(/`((?:src|dashboard)\/[^`]*)`/g))
        expect(existsSync(join(ROOT, p[1]!)), `${section}: ${p[1]}`).toBe(true);
    }
  });
});
