/**
 * A local identity provider's security event transmitter (§6): it serves the RISC configuration
 * document (`/.well-known/risc-configuration`, whose `jwks_uri` names its key set) and the JWKS
 * (`/jwks`), and signs security event tokens (RFC 8417 shape: `iss`, `aud`, `iat`, `jti`, `events`)
 * with RS256 keys of its own, as a real provider does. Knobs make every bad token the receiver must
 * refuse (wrong issuer or audience, expired, forged signature, unknown kid, `alg: none`, HS256
 * signed with the public key) and `rotate()` replaces the signing key with one of a new `kid`.
 * It counts the fetches of each document, so tests can see the key cache at work.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';

export const SECEVENT = 'https://schemas.openid.net/secevent';
export const EVENT = {
  accountDisabled: `${SECEVENT}/risc/event-type/account-disabled`,
  accountEnabled: `${SECEVENT}/risc/event-type/account-enabled`,
  sessionsRevoked: `${SECEVENT}/risc/event-type/sessions-revoked`,
  tokensRevoked: `${SECEVENT}/oauth/event-type/tokens-revoked`,
  credentialChangeRequired: `${SECEVENT}/risc/event-type/account-credential-change-required`,
  verification: `${SECEVENT}/risc/event-type/verification`,
} as const;

type SigningKey = { kid: string; privateKey: CryptoKey; publicJwk: JWK };

export type SignOptions = {
  /** default: the fake's issuer */
  iss?: string;
  /** default: the first audience given to the fake; null: no `aud` claim */
  aud?: string | string[] | null;
  /** default: a fresh uuid; null: no `jti` */
  jti?: string | null;
  events?: Record<string, unknown>;
  /** more claims (the legacy receiver's `sub`) */
  claims?: Record<string, unknown>;
  /** seconds since the epoch; set in the past for an expired token */
  exp?: number;
  /** `kid` in the header other than the signing key's (an unknown kid) */
  kid?: string;
  /** signed with a key that is not in the JWKS, under the current key's kid (a forgery) */
  forged?: boolean;
  /** `none`: unsigned; `HS256`: an HMAC over the public key's JWK as the secret (algorithm confusion) */
  alg?: 'RS256' | 'none' | 'HS256';
};

export type FakeRiscIssuer = {
  url: string;
  issuer: string;
  configUrl: string;
  /** fetches of the configuration document and of the JWKS */
  fetches: { config: number; jwks: number };
  currentKid(): string;
  sign(options?: SignOptions): Promise<string>;
  /** A new signing key with a new kid; `keepOld` leaves the old one in the JWKS too. */
  rotate(options?: { keepOld?: boolean }): Promise<string>;
  close(): Promise<void>;
};

async function newKey(): Promise<SigningKey> {
  const kid = `k-${randomUUID().slice(0, 8)}`;
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
  return { kid, privateKey, publicJwk };
}

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

export async function startFakeRiscIssuer(options: { audiences: string[] }): Promise<FakeRiscIssuer> {
  let keys: SigningKey[] = [await newKey()];
  const stranger = await newKey(); // never published: signs forgeries
  const fetches = { config: 0, jwks: 0 };
  let base = '';

  const server: Server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.method === 'GET' && req.url === '/.well-known/risc-configuration') {
      fetches.config++;
      res.end(
        JSON.stringify({
          issuer: base,
          jwks_uri: `${base}/jwks`,
          delivery_methods_supported: ['https://schemas.openid.net/secevent/risc/delivery-method/push'],
          configuration_endpoint: `${base}/v1beta/stream`,
        }),
      );
      return;
    }
    if (req.method === 'GET' && req.url === '/jwks') {
      fetches.jwks++;
      res.end(JSON.stringify({ keys: keys.map((k) => k.publicJwk) }));
      return;
    }
    res.statusCode = 404;
    res.end(JSON.stringify({ error: 'not found' }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const current = () => keys[keys.length - 1]!;

  return {
    url: base,
    issuer: base,
    configUrl: `${base}/.well-known/risc-configuration`,
    fetches,
    currentKid: () => current().kid,
    async sign(o = {}) {
      const key = current();
      const now = Math.floor(Date.now() / 1000);
      const payload: Record<string, unknown> = {
        iss: o.iss ?? base,
        iat: now,
        events: o.events ?? { [EVENT.verification]: { state: 'hello' } },
        ...o.claims,
      };
      if (o.aud !== null) payload.aud = o.aud ?? options.audiences[0];
      if (o.jti !== null) payload.jti = o.jti ?? randomUUID();
      if (o.exp !== undefined) payload.exp = o.exp;
      const kid = o.kid ?? key.kid;
      if (o.alg === 'none') return `${b64url({ alg: 'none', typ: 'secevent+jwt', kid })}.${b64url(payload)}.`;
      if (o.alg === 'HS256') {
        const secret = createHash('sha256').update(JSON.stringify(key.publicJwk)).digest();
        return new SignJWT(payload).setProtectedHeader({ alg: 'HS256', typ: 'secevent+jwt', kid }).sign(secret);
      }
      return new SignJWT(payload)
        .setProtectedHeader({ alg: 'RS256', typ: 'secevent+jwt', kid })
        .sign(o.forged ? stranger.privateKey : key.privateKey);
    },
    async rotate(o = {}) {
      const next = await newKey();
      keys = o.keepOld ? [...keys, next] : [next];
      return next.kid;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
