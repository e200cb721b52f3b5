/**
 * `npm run bench [-- NAME...]`: runs every bench/*.bench.ts (or those whose name contains one of
 * the arguments) one after another, prints each result, and writes it to its own section of
 * docs/benchmarks.md and to bench/results/NAME.json.
 *
 * A bench module exports `run(): Promise<{ name, results, markdown }>`. Benches run in turn, never
 * together: each one loads the whole machine.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { tuneV8ForServing } from '../src/lib/v8-tuning.ts';
import { type BenchOutput, writeJson, writeSection } from './lib/report.ts';

const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));
const ROOT = join(BENCH_DIR, '..');
const DOC = join(ROOT, 'docs', 'benchmarks.md');

// the in-process benches run the platform in this process: with the V8 settings src/main.ts serves with
tuneV8ForServing();

const filters = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const files = readdirSync(BENCH_DIR)
  .filter((f) => f.endsWith('.bench.ts'))
  .sort()
  .filter((f) => filters.length === 0 || filters.some((q) => f.replace(/\.bench\.ts$/, '').includes(q)));

if (files.length === 0) {
  console.error(
    `No bench matches ${filters.join(', ') || '(any)'}; available: ${readdirSync(BENCH_DIR)
      .filter((f) => f.endsWith('.bench.ts'))
      .join(', ')}`,
  );
  process.exit(1);
}

let failed = 0;
for (const file of files) {
  const started = Date.now();
  console.log(`\n=== ${file}`);
  try {
    const mod = (await import(pathToFileURL(join(BENCH_DIR, file)).href)) as { run?: () => Promise<BenchOutput> };
    if (typeof mod.run !== 'function') throw new Error(`${file} does not export run()`);
    const out = await mod.run();
    console.log(out.markdown.trim());
    writeSection(DOC, out.name, out.markdown);
    writeJson(join(BENCH_DIR, 'results', `${out.name}.json`), out.results);
    console.log(
      `\n(${out.name}: ${((Date.now() - started) / 1000).toFixed(0)} s; written to docs/benchmarks.md and bench/results/${out.name}.json)`,
    );
  } catch (err) {
    failed += 1;
    console.error(`${file} failed:`, err instanceof Error ? (err.stack ?? err.message) : err);
  }
}
process.exit(failed ? 1 : 0);
