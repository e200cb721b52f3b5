/**
 * The kinds of value a setting takes (env.ts's schema is built from them): booleans, ports,
 * optional strings and URLs, comma lists, and TRUST_PROXY's forms. Each says in its error which
 * values it accepts (docs/configuration.md).
 */
import { isIP } from 'node:net';
import { z } from 'zod';

/** Booleans accept true/false/1/0 only (docs/configuration.md), never "any non-empty string". */
export const bool = (fallback: boolean) =>
  z
    .enum(['true', 'false', '1', '0'], { error: 'must be one of true, false, 1, 0' })
    .optional()
    .transform((v) => (v === undefined ? fallback : v === 'true' || v === '1'));

export const port = (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback);
export const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);
/** A whole number from 1 to `max`, or undefined when unset or empty. */
export const optionalPositiveInt = (max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .optional()
    .transform((v) => (v === undefined || v.trim() === '' ? undefined : Number(v)))
    .pipe(z.number({ error: 'must be a whole number above 0' }).int().positive().max(max).optional());
export const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));
export const url = (fallback: string) => z.url({ error: 'must be a URL' }).default(fallback);
export const optionalUrl = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()))
  .pipe(z.url({ error: 'must be a URL' }).optional());
export const list = z
  .string()
  .optional()
  .transform((v) =>
    (v ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );

/**
 * TRUST_PROXY: which peers may set the client address through `X-Forwarded-For` (every per-IP
 * limit depends on it). `false`/`0`: none. `true`/`1`: proxies on loopback only (a reverse proxy
 * on the same machine), never "everyone": that would let any client choose its IP by sending a
 * header. Otherwise a comma list of addresses, CIDRs or the names `loopback`, `linklocal`,
 * `uniquelocal` (the forms Fastify's `trustProxy` takes), or a hop count of 2 or more. The client
 * address is then the rightmost entry not sent by a trusted proxy (docs/security.md).
 */
export type TrustProxy = false | string[] | number;
const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);
function validProxyEntry(entry: string): boolean {
  if (PROXY_NAMES.has(entry)) return true;
  const [addr, bits, ...rest] = entry.split('/');
  if (rest.length > 0 || !addr) return false;
  const family = isIP(addr);
  if (family === 0) return false;
  if (bits === undefined) return true;
  if (!/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}
export const trustProxy = z
  .string()
  .optional()
  .transform((raw, ctx): TrustProxy => {
    const v = (raw ?? '').trim();
    if (v === '' || v === 'false' || v === '0') return false;
    if (v === 'true' || v === '1') return ['loopback'];
    if (/^\d+$/.test(v)) return Number(v);
    const entries = v
      .split(',')
      .map((e) => e.trim())
      .filter(Boolean);
    const bad = entries.find((e) => !validProxyEntry(e));
    if (bad !== undefined || entries.length === 0) {
      ctx.addIssue({
        code: 'custom',
        message: `must be true, false, a hop count, or a comma list of proxy addresses/CIDRs${bad !== undefined ? ` ("${bad}" is none of these)` : ''}`,
      });
      return z.NEVER;
    }
    return entries;
  });
