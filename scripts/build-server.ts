/**
 * Compiles src/ to plain JavaScript in dist/ for `npm start` (docs/benchmarks.md "memory").
 *
 * Node runs our TypeScript directly by stripping its types, but the stripper (a WebAssembly build
 * of swc) stays resident for the life of the process: ~18 MB of the platform's idle memory, and
 * of every built-in-runtime agent's. Compiling once at start-up removes it. The compilation is
 * Node's own `stripTypeScriptTypes` (the same transform Node applies when it runs a .ts file, so
 * dist/ behaves exactly like src/, and tests keep running the sources) plus relative import
 * specifiers renamed from `.ts` to `.js`. Unit tests (`*.test.ts`) are left out; every other file (the SQL migrations) is copied, and
 * dist/ mirrors src/ at the same depth, so paths computed from `import.meta.url` still resolve.
 *
 * Usage: node scripts/build-server.ts [outDir]   (default dist/, replaced whole)
 */
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const SRC = join(ROOT, 'src');

/** `from './x.ts'`, `import './x.ts'`, `import('./x.ts')`, `export … from '../y.ts'`: relative specifiers only. */
const SPECIFIER = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.{1,2}\/[^'"\n]+?)\.ts\2/g;

export function compileModule(source: string, file: string): string {
  const js = stripTypeScriptTypes(source, { mode: 'strip', sourceUrl: file });
  return js.replace(SPECIFIER, (_m, lead: string, quote: string, path: string) => `${lead}${quote}${path}.js${quote}`);
}

export function buildServer(outDir: string): { modules: number; files: number } {
  rmSync(outDir, { recursive: true, force: true });
  let modules = 0;
  let files = 0;
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const from = join(dir, entry.name);
      const to = join(outDir, relative(SRC, from));
      if (entry.isDirectory()) {
        walk(from);
      } else if (entry.name.endsWith('.test.ts')) {
        // unit tests beside their module (vitest runs them from src/): not part of the program
      } else if (entry.name.endsWith('.ts')) {
        mkdirSync(dirname(to), { recursive: true });
        writeFileSync(to.replace(/\.ts$/, '.js'), compileModule(readFileSync(from, 'utf8'), from));
        modules++;
      } else {
        mkdirSync(dirname(to), { recursive: true });
        cpSync(from, to);
        files++;
      }
    }
  };
  walk(SRC);
  return { modules, files };
}

if (import.meta.main) {
  const out = resolve(ROOT, process.argv[2] ?? 'dist');
  const started = Date.now();
  const { modules, files } = buildServer(out);
  process.stdout.write(
    `server: ${modules} modules compiled, ${files} files copied to ${relative(ROOT, out) || '.'} in ${Date.now() - started} ms\n`,
  );
}
