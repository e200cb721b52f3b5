/**
 * Verifies the identity provider's security event tokens (§6 "Security events"), with `jose`.
 *
 * §6's order is kept and each step has its own answer: the issuer must be IDP_ISSUER; the audience
 * must be one of the configured client ids (IDP_CLIENT_ID is a list, every id is accepted); the
 * signing keys come from the RISC configuration document's `jwks_uri`; the key is chosen by `kid`;
 * only an RS256 signature is accepted (`alg: none`, HS256 and every other algorithm are refused
 * before any key is looked at, so a public key can never serve as an HMAC secret).
 *
 * The configuration document and its key set are kept 24 hours (§8 "signing-key cache"). A `kid`
 * that is not in the cached set makes jose fetch the key set again (the provider rotated its
 * keys), at most once per cooldown, so tokens with made-up kids cannot make us flood the provider.
 */
import type { createRemoteJWKSet, JWTPayload, ProtectedHeaderParameters } from 'jose';
import { LIMITS } from '../../config/limits.ts';
import { badRequest, serviceUnavailable } from '../../lib/errors.ts';
import { jose } from '../../lib/jose.ts';

export type RiscVerifierOptions = {
  /** IDP_ISSUER */
  issuer: string;
  /** IDP_CLIENT_ID: every id is an accepted audience */
  audiences: readonly string[];
  /** IDP_RISC_CONFIG_URL, default `${IDP_ISSUER}/.well-known/risc-configuration` */
  configUrl: string;
  /** how long the configuration and key set are kept (default §8: 24 hours) */
  cacheMs?: number;
  /** an unknown `kid` refetches the key set at most this often */
  refetchCooldownMs?: number;
  /** one request to the provider */
  timeoutMs?: number;
  now?: () => number;
};

export type VerifiedToken = { header: { kid: string }; payload: JWTPayload };

/** The default RISC configuration URL (docs/configuration.md IDP_RISC_CONFIG_URL). */
export const riscConfigUrl = (issuer: string, configured?: string) =>
  configured ?? `${issuer.replace(/\/+$/, '')}/.well-known/risc-configuration`;

const invalid = (message: string) => badRequest(message);

export function createRiscVerifier(options: RiscVerifierOptions) {
  const cacheMs = options.cacheMs ?? LIMITS.riscKeyCacheMs;
  const cooldownMs = options.refetchCooldownMs ?? LIMITS.riscKeyRefetchCooldownMs;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const now = options.now ?? Date.now;
  const audiences = new Set(options.audiences);

  let cached: { jwksUri: string; keys: ReturnType<typeof createRemoteJWKSet>; until: number } | undefined;
  let loading: Promise<ReturnType<typeof createRemoteJWKSet>> | undefined;

  /** The key set named by the RISC configuration document, both kept `cacheMs`. */
  async function loadKeySet() {
    let doc: { jwks_uri?: unknown };
    try {
      const res = await fetch(options.configUrl, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(timeoutMs) });
      if (!res.ok) throw new Error(`status ${res.status}`);
      doc = (await res.json()) as { jwks_uri?: unknown };
    } catch {
      // the provider's fault, not the token's: the transmitter may deliver again later
      throw serviceUnavailable('Security event signing keys unavailable');
    }
    if (typeof doc.jwks_uri !== 'string' || !URL.canParse(doc.jwks_uri)) {
      throw serviceUnavailable('Security event signing keys unavailable');
    }
    // the same jwks_uri as before keeps jose's key set (and what it fetched); a new one starts over
    const { createRemoteJWKSet } = await jose();
    const keys =
      cached?.jwksUri === doc.jwks_uri
        ? cached.keys
        : createRemoteJWKSet(new URL(doc.jwks_uri), { cacheMaxAge: cacheMs, cooldownDuration: cooldownMs, timeoutDuration: timeoutMs });
    cached = { jwksUri: doc.jwks_uri, keys, until: now() + cacheMs };
    return keys;
  }

  async function keySet() {
    if (cached && cached.until > now()) return cached.keys;
    loading ??= loadKeySet().finally(() => {
      loading = undefined;
    });
    return loading;
  }

  /**
   * The token's header and payload once every §6 check passed; a 400 AppError naming the first
   * check that failed otherwise, or 503 when the provider's keys cannot be fetched.
   * `requireAudience: false` (the legacy receiver, whose tokens need not carry one) still refuses
   * an audience that is present and not ours.
   */
  async function verify(token: string, opts: { requireAudience?: boolean } = {}): Promise<VerifiedToken> {
    const { decodeJwt, decodeProtectedHeader, errors, jwtVerify } = await jose();
    let header: ProtectedHeaderParameters;
    let claims: JWTPayload;
    try {
      header = decodeProtectedHeader(token);
      claims = decodeJwt(token);
    } catch {
      throw invalid('Invalid token');
    }
    // §6 order: issuer, audience, then the key by kid and the RS256 signature
    if (claims.iss !== options.issuer) throw invalid('Invalid token issuer');
    const aud = claims.aud === undefined ? [] : Array.isArray(claims.aud) ? claims.aud : [claims.aud];
    if ((opts.requireAudience !== false || aud.length > 0) && !aud.some((a) => audiences.has(a))) {
      throw invalid('Invalid token audience');
    }
    if (header.alg !== 'RS256') throw invalid('Unsupported token algorithm: only RS256 is accepted');
    if (typeof header.kid !== 'string' || header.kid === '') throw invalid('Token has no key id');
    const keys = await keySet();
    try {
      const { payload } = await jwtVerify(token, keys, {
        issuer: options.issuer,
        ...(aud.length > 0 ? { audience: [...audiences] } : {}),
        algorithms: ['RS256'],
        currentDate: new Date(now()),
      });
      return { header: { kid: header.kid }, payload };
    } catch (err) {
      if (err instanceof errors.JWKSNoMatchingKey) throw invalid('Unknown token signing key');
      if (err instanceof errors.JWSSignatureVerificationFailed) throw invalid('Invalid token signature');
      if (err instanceof errors.JWTExpired) throw invalid('Token expired');
      if (err instanceof errors.JWTClaimValidationFailed) throw invalid(`Invalid token claim: ${err.claim}`);
      if (err instanceof errors.JWKSTimeout || err instanceof errors.JWKSInvalid || isFetchFailure(err, errors)) {
        throw serviceUnavailable('Security event signing keys unavailable');
      }
      throw invalid('Invalid token');
    }
  }

  return { verify };
}

/** jose's own fetch errors (connection refused, a non-200 answer) are plain errors or JOSEError. */
function isFetchFailure(err: unknown, errors: { JOSEError: typeof import('jose').errors.JOSEError }): boolean {
  if (!(err instanceof Error)) return false;
  if (err instanceof errors.JOSEError) return err.code === 'ERR_JOSE_GENERIC' && /fetch|response/i.test(err.message);
  return err.name === 'TypeError' || err.name === 'AbortError' || err.name === 'TimeoutError';
}

export type RiscVerifier = ReturnType<typeof createRiscVerifier>;
