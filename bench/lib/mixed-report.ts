/**
 * Figures of a mixed load run (mixed-client.ts ticks): per route the count, the answers by status,
 * p50/p99; the server errors (5xx, no answer, timeout) outside declared fault windows; and the
 * slope of resident memory samples.
 */
import type { Tick } from './mixed-client.ts';

export type RouteSummary = { route: string; count: number; rps: number; p50Ms: number; p99Ms: number; status: Record<string, number> };
export type Window = { name: string; from: number; to: number };

const pct = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]! : NaN);

/** A status the platform must never answer outside a fault: 5xx, a refused or reset connection, no answer in time. */
export const isServerFailure = (status: string) => status.startsWith('5') || status === 'ERR' || status === 'TIMEOUT';

export function summarise(ticks: Tick[], from = 0, to = Number.POSITIVE_INFINITY): RouteSummary[] {
  const per = new Map<string, { lat: number[]; status: Record<string, number> }>();
  const inRange = ticks.filter((t) => t.t >= from && t.t <= to);
  for (const tick of inRange)
    for (const [route, r] of Object.entries(tick.routes)) {
      const acc = per.get(route) ?? { lat: [], status: {} };
      per.set(route, acc);
      for (const x of r.lat) acc.lat.push(x);
      for (const [s, n] of Object.entries(r.status)) acc.status[s] = (acc.status[s] ?? 0) + n;
    }
  const seconds = Math.max(1, inRange.length);
  return [...per.entries()].map(([route, acc]) => {
    const sorted = acc.lat.sort((a, b) => a - b);
    return {
      route,
      count: sorted.length,
      rps: sorted.length / seconds,
      p50Ms: pct(sorted, 0.5),
      p99Ms: pct(sorted, 0.99),
      status: acc.status,
    };
  });
}

/** Server failures per second outside every window (a tick covers the second before its time). */
export function failuresOutside(ticks: Tick[], windows: Window[]): { t: number; route: string; status: string; n: number }[] {
  const out: { t: number; route: string; status: string; n: number }[] = [];
  for (const tick of ticks) {
    if (windows.some((w) => tick.t >= w.from && tick.t - 1000 <= w.to)) continue;
    for (const [route, r] of Object.entries(tick.routes))
      for (const [status, n] of Object.entries(r.status)) if (isServerFailure(status)) out.push({ t: tick.t, route, status, n });
  }
  return out;
}

/** Least-squares slope of (time ms, MB) samples, in MB per minute. */
export function slopeMbPerMin(samples: { t: number; mb: number }[]): number {
  if (samples.length < 2) return NaN;
  const n = samples.length;
  const mx = samples.reduce((s, x) => s + x.t, 0) / n;
  const my = samples.reduce((s, x) => s + x.mb, 0) / n;
  let num = 0;
  let den = 0;
  for (const x of samples) {
    num += (x.t - mx) * (x.mb - my);
    den += (x.t - mx) ** 2;
  }
  return den === 0 ? 0 : (num / den) * 60_000;
}

const fmt = (n: number, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : '–');

export function routeTable(rows: RouteSummary[]): string {
  const lines = ['| route | requests | req/s | p50 ms | p99 ms | answers |', '|---|---:|---:|---:|---:|---|'];
  for (const r of rows) {
    const answers = Object.entries(r.status)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([s, n]) => `${s}: ${n}`)
      .join(', ');
    lines.push(`| \`${r.route}\` | ${r.count} | ${fmt(r.rps, 1)} | ${fmt(r.p50Ms, 1)} | ${fmt(r.p99Ms, 1)} | ${answers} |`);
  }
  return lines.join('\n');
}
