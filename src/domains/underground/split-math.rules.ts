/**
 * Royalty split arithmetic (§2 "Royalty split", §4.15): shares are percentages that must sum to
 * exactly 100, with at most 2 decimals (so each is a whole number of basis points). Each
 * recipient gets floor(total × bps / 10 000) micro-USDC; the few micros that flooring leaves over
 * (fewer than the number of recipients) go one each to the recipients in list order, so the
 * amounts always sum exactly to the total and no micro is created or lost. BigInt throughout:
 * total × bps exceeds JavaScript's exact integers for large totals.
 */
import { badRequest } from '../../lib/errors.ts';

export const TOTAL_BPS = 10_000;

/** A share percentage (e.g. 33.33) as basis points; 400 unless positive, ≤ 100, at most 2 decimals. */
export function shareToBps(share: number, index: number): number {
  const bps = Math.round(share * 100);
  if (!Number.isFinite(share) || share <= 0 || share > 100 || Math.abs(bps - share * 100) > 1e-6) {
    throw badRequest(`recipients[${index}].share must be a percentage above 0 and at most 100, with at most 2 decimals`);
  }
  return bps;
}

/** Each recipient's amount in micros; the bps must sum to TOTAL_BPS (checked here too). */
export function splitAmounts(totalMicros: number, bps: readonly number[]): number[] {
  const sum = bps.reduce((s, b) => s + b, 0);
  if (sum !== TOTAL_BPS) throw badRequest(`Recipient shares must sum to exactly 100 (they sum to ${sum / 100})`);
  const total = BigInt(totalMicros);
  const amounts = bps.map((b) => (total * BigInt(b)) / BigInt(TOTAL_BPS));
  let left = total - amounts.reduce((s, a) => s + a, 0n);
  for (let i = 0; left > 0n; i++, left--) amounts[i % amounts.length]! += 1n;
  return amounts.map(Number);
}
