/**
 * Writing results: each bench owns the part of docs/benchmarks.md between
 * `<!-- bench:NAME -->` and `<!-- /bench:NAME -->` (appended when missing), so benches update
 * their own section without touching the others or the hand-written text; the raw figures go to
 * bench/results/NAME.json.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { LoadResult } from './load.ts';

export type BenchOutput = { name: string; results: Record<string, unknown>; markdown: string };

export function writeSection(file: string, name: string, markdown: string): void {
  const open = `<!-- bench:${name} -->`;
  const close = `<!-- /bench:${name} -->`;
  const block = `${open}\n${markdown.trim()}\n${close}`;
  const doc = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n';
  const start = doc.indexOf(open);
  const end = doc.indexOf(close);
  let next: string;
  if (start !== -1 && end > start) next = doc.slice(0, start) + block + doc.slice(end + close.length);
  else next = `${doc.trimEnd()}\n\n${block}\n`;
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, next);
}

export function writeJson(file: string, data: unknown): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(data, null, 2)}\n`);
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** A markdown table of load results, one row per label. */
export function loadTable(rows: { label: string; result: LoadResult; ratio?: number }[]): string {
  const lines = ['| case | req/s | p50 ms | p99 ms | ratio to baseline | non-2xx / errors |', '|---|---:|---:|---:|---:|---:|'];
  for (const { label, result: r, ratio } of rows) {
    lines.push(
      `| ${label} | ${fmt(r.rps)} | ${fmt(r.p50Ms)} | ${fmt(r.p99Ms)} | ${ratio === undefined ? '' : fmt(ratio, 2)} | ${r.non2xx} / ${r.errors + r.timeouts} |`,
    );
  }
  return lines.join('\n');
}

export const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;
