/**
 * Money in the payments domain is integer micro-USD (1 USD = 1 000 000 micros), never a float
 * (docs/payments.md). Conversions to and from the units the specification uses live here.
 */
export const MICROS_PER_USD = 1_000_000;

/** Upper bound of one movement: $1 000 000 keeps every sum far inside JavaScript's exact integers. */
export const MAX_MOVEMENT_MICROS = 1_000_000 * MICROS_PER_USD;

export const isMicros = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n > 0 && n <= MAX_MOVEMENT_MICROS;

/** Exact decimal USD string of an amount of micros, e.g. 50000 → "0.05", 1234567 → "1.234567". */
export function microsToUsd(micros: number): string {
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  const whole = Math.floor(abs / MICROS_PER_USD);
  const frac = String(abs % MICROS_PER_USD)
    .padStart(6, '0')
    .replace(/0+$/, '');
  return `${sign}${whole}.${frac.length < 2 ? frac.padEnd(2, '0') : frac}`;
}

/**
 * Parses a USD amount given as a decimal string or number ("1.50", 1.5) into micros without
 * floating-point arithmetic; undefined for anything else (negative, more than 6 decimals, NaN).
 */
export function usdToMicros(value: unknown): number | undefined {
  const s = typeof value === 'number' ? (Number.isFinite(value) ? String(value) : '') : typeof value === 'string' ? value.trim() : '';
  const m = /^(\d{1,7})(?:\.(\d{1,6}))?$/.exec(s);
  if (!m) return undefined;
  return Number(m[1]) * MICROS_PER_USD + Number((m[2] ?? '').padEnd(6, '0'));
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
/** Wallet addresses are keyed lower-case (0x + 40 hex); undefined when not an address. */
export const normalizeAddress = (value: unknown): string | undefined =>
  typeof value === 'string' && ADDRESS.test(value) ? value.toLowerCase() : undefined;
