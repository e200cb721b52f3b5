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
 * `npm start` (prestart) and `npm run build:server` build into a folder of its own named after the
 * hash of the sources, and switch the `dist` link to it (scripts/lib/switch-build.ts): several
 * starts at once in one checkout all come up, and a platform that runs keeps its own tree, even
 * after a rebuild. Unchanged sources are not compiled again.
 *
 * Usage: node scripts/build-server.ts            (dist, as above)
 *        node scripts/build-server.ts <outDir>   (just compile into outDir, replaced whole)
 */
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { IN_USE_DIR } from '../src/lib/code-tree.ts';
import { hashInputs, installBuild, listFiles, markedInUse } from './lib/switch-build.ts';

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

/** Folders of server builds beside the `dist` link (.gitignore). */
const PREFIX = '.dist-build-';

/**
 * Points `<root>/dist` at a build of the current sources, compiling them only when no build of
 * exactly these sources (and this Node, whose type stripper compiles them) exists.
 */
export async function installServer(): Promise<{ dir: string; built: boolean; modules: number; files: number }> {
  const sources = listFiles(ROOT, SRC, (name) => name.endsWith('.test.ts'));
  const hash = hashInputs(ROOT, [...sources, relative(ROOT, import.meta.filename), 'scripts/lib/switch-build.ts'], [process.version]);
  let counts = { modules: 0, files: 0 };
  const r = await installBuild({
    link: join(ROOT, 'dist'),
    prefix: PREFIX,
    name: hash,
    upToDate: (dir) => basename(dir) === `${PREFIX}${hash}`,
    build: (dir) => {
      counts = buildServer(dir);
      mkdirSync(join(dir, IN_USE_DIR)); // where each platform process marks the tree it runs from
      return undefined;
    },
    inUse: markedInUse,
  });
  return { ...r, ...counts };
}

if (import.meta.main) {
  const started = Date.now();
  if (process.argv[2]) {
    const out = resolve(ROOT, process.argv[2]);
    const { modules, files } = buildServer(out);
    process.stdout.write(
      `server: ${modules} modules compiled, ${files} files copied to ${relative(ROOT, out) || '.'} in ${Date.now() - started} ms\n`,
    );
  } else {
    const r = await installServer();
    const where = `dist -> ${relative(ROOT, r.dir)}`;
    process.stdout.write(
      r.built
        ? `server: ${r.modules} modules compiled, ${r.files} files copied (${where}) in ${Date.now() - started} ms\n`
        : `server: up to date (${where})\n`,
    );
  }
}
