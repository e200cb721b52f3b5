/**
 * The custodial wallet provider (§4.4 `CDP_*`): Coinbase Developer Platform's v2 EVM accounts
 * REST API at CDP_API_URL. A small client of the same REST shapes and authentication as the
 * official `@coinbase/cdp-sdk` (which we do not depend on: it brings Solana libraries, axios and a
 * second zod for two calls):
 * - every request carries `Authorization: Bearer <JWT>` signed with the API key secret (an EC P-256
 *   PEM key → ES256, or a base64 Ed25519 key → EdDSA), `kid` the API key id, claims
 *   `{sub, iss:'cdp', aud:['cdp_service'], nbf, exp (+120 s), uris:['METHOD host/path']}`;
 * - account writes also carry `X-Wallet-Auth: <JWT>` signed ES256 with the wallet secret (base64
 *   PKCS#8 DER), claims `{iat, nbf, jti, uris, reqHash}` where reqHash is the SHA-256 of the body
 *   with its keys sorted;
 * - imported private keys are sent encrypted with CDP's RSA public key (OAEP, SHA-256), never clear.
 * The JWTs are signed by `jose`; node:crypto reads the keys (a SEC1 or PKCS#8 PEM, a raw Ed25519
 * seed, a DER wallet key: more forms than jose's importers take).
 * Tests point CDP_API_URL at a local server speaking the same protocol (test/fakes/cdp-api.ts).
 */
import { constants, createHash, createPrivateKey, type KeyObject, publicEncrypt, randomBytes } from 'node:crypto';
import type { JWTPayload } from 'jose';
import { jose } from '../../lib/jose.ts';

export type CdpAccount = { address: string; name: string };

export interface CustodialWalletProvider {
  createAccount(name: string): Promise<CdpAccount>;
  importAccount(name: string, privateKeyHex: string): Promise<CdpAccount>;
}

export class CdpError extends Error {
  override name = 'CdpError';
  readonly status: number | undefined;
  constructor(message: string, status: number | undefined) {
    super(message);
    this.status = status;
  }
}

/** CDP's public key for encrypting imported private keys (the one the official SDK ships). */
export const CDP_IMPORT_PUBLIC_KEY = `-----BEGIN PUBLIC KEY-----
MIICIjANBgkqhkiG9w0BAQEFAAOCAg8AMIICCgKCAgEA2Fxydgm/ryYk0IexQIuL
9DKyiIk2WmS36AZ83a9Z0QX53qdveg08b05g1Qr+o+COoYOT/FDi8anRGAs7rIyS
uigrjHR6VrmFjnGrrTr3MINwC9cYQFHwET8YVGRq+BB3iFTB1kIb9XJ/vT2sk1xP
hJ6JihEwSl4DgbeVjqw59wYqrNg355oa8EdFqkmfGU2tpbM56F8iv1F+shwkGo3y
GhW/UOQ5OLauXvsqo8ranwsK+lqFblLEMlNtn1VSJeO2vMxryeKFrY2ob8VqGchC
ftPJiLWs2Du6juw4C1rOWwSMlXzZ6cNMHkxdTcEHMr3C2TEHgzjZY41whMwNTB8q
/pxXnIbH77caaviRs4R/POe8cSsznalXj85LULvFWOIHp0w+jEYSii9Rp9XtHWAH
nrK/O/SVDtT1ohp2F+Zg1mojTgKfLOyGdOUXTi95naDTuG770rSjHdL80tJBz1Fd
+1pzGTGXGHLZQLX5YZm5iuy2cebWfF09VjIoCIlDB2++tr4M+O0Z1X1ZE0J5Ackq
rOluAFalaKynyH3KMyRg+NuLmibu5OmcMjCLK3D4X1YLiN2OK8/bbpEL8JYroDwb
EXIUW5mGS06YxfSUsxHzL9Tj00+GMm/Gvl0+4/+Vn8IXVHjQOSPNEy3EnqCiH/OW
8v0IMC32CeGrX7mGbU+MzlsCAwEAAQ==
-----END PUBLIC KEY-----`;

/** JSON with object keys sorted at every level (the reqHash input). */
export function sortedJson(value: unknown): string {
  const sort = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sort)
      : v && typeof v === 'object'
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, sort((v as Record<string, unknown>)[k])]),
          )
        : v;
  return JSON.stringify(sort(value));
}

function apiKey(secret: string): { key: KeyObject; alg: 'ES256' | 'EdDSA' } {
  if (secret.includes('BEGIN')) return { key: createPrivateKey(secret.replace(/\\n/g, '\n')), alg: 'ES256' };
  const raw = Buffer.from(secret, 'base64');
  if (raw.length !== 64) throw new Error('CDP_API_KEY_SECRET must be a PEM EC key or a base64 Ed25519 key (64 bytes)');
  // PKCS#8 wrapping of the 32-byte Ed25519 seed
  const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), raw.subarray(0, 32)]);
  return { key: createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }), alg: 'EdDSA' };
}

const jwt = async (header: Record<string, string>, claims: JWTPayload, key: KeyObject, alg: 'ES256' | 'EdDSA') => {
  const { SignJWT } = await jose();
  return new SignJWT(claims).setProtectedHeader({ ...header, alg }).sign(key);
};

export function createCdpClient(options: {
  apiUrl: string;
  apiKeyId: string;
  apiKeySecret: string;
  walletSecret: string | undefined;
  importPublicKey?: string;
  timeoutMs?: number;
}): CustodialWalletProvider {
  const base = new URL(options.apiUrl);
  // keys are parsed at the first call: a malformed secret is that call's 500 with `details`,
  // never a platform that does not start
  let keys: { signer: ReturnType<typeof apiKey>; walletKey: KeyObject | undefined } | undefined;
  function loadKeys() {
    if (keys) return keys;
    try {
      keys = {
        signer: apiKey(options.apiKeySecret),
        walletKey: options.walletSecret
          ? createPrivateKey({ key: Buffer.from(options.walletSecret, 'base64'), format: 'der', type: 'pkcs8' })
          : undefined,
      };
    } catch (err) {
      throw new CdpError(`CDP credentials are malformed: ${(err as Error).message}`, undefined);
    }
    return keys;
  }

  async function post(path: string, body: Record<string, unknown>): Promise<CdpAccount> {
    const fullPath = `${base.pathname.replace(/\/+$/, '')}/platform${path}`;
    const uri = `POST ${base.host}${fullPath}`;
    const { signer, walletKey } = loadKeys();
    const now = Math.floor(Date.now() / 1000);
    const authorization = await jwt(
      { kid: options.apiKeyId, typ: 'JWT', nonce: randomBytes(8).toString('hex') },
      { sub: options.apiKeyId, iss: 'cdp', aud: ['cdp_service'], nbf: now, exp: now + 120, uris: [uri] },
      signer.key,
      signer.alg,
    );
    if (!walletKey) throw new CdpError('CDP_WALLET_SECRET is not set: account writes need the wallet secret', undefined);
    const walletAuth = await jwt(
      { typ: 'JWT' },
      {
        iat: now,
        nbf: now,
        jti: randomBytes(16).toString('hex'),
        uris: [uri],
        reqHash: createHash('sha256').update(sortedJson(body)).digest('hex'),
      },
      walletKey,
      'ES256',
    );
    let res: Response;
    try {
      res = await fetch(new URL(fullPath, base), {
        method: 'POST',
        headers: {
          authorization: `Bearer ${authorization}`,
          'x-wallet-auth': walletAuth,
          'content-type': 'application/json',
          'x-idempotency-key': crypto.randomUUID(),
        },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(options.timeoutMs ?? 15_000),
      });
    } catch (err) {
      throw new CdpError(`CDP API unreachable: ${(err as Error).message}`, undefined);
    }
    const text = await res.text();
    let json: { address?: unknown; name?: unknown; errorMessage?: unknown } = {};
    try {
      json = JSON.parse(text);
    } catch {
      // not JSON: reported below
    }
    if (!res.ok)
      throw new CdpError(typeof json.errorMessage === 'string' ? json.errorMessage : `CDP API answered ${res.status}`, res.status);
    if (typeof json.address !== 'string') throw new CdpError('CDP API answered without an address', res.status);
    return { address: json.address, name: typeof json.name === 'string' ? json.name : String(body.name ?? '') };
  }

  return {
    createAccount: (name) => post('/v2/evm/accounts', { name }),
    async importAccount(name, privateKeyHex) {
      let encrypted: Buffer;
      try {
        encrypted = publicEncrypt(
          { key: options.importPublicKey ?? CDP_IMPORT_PUBLIC_KEY, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
          Buffer.from(privateKeyHex.replace(/^0x/, ''), 'hex'),
        );
      } catch (err) {
        throw new CdpError(`cannot encrypt the key for import (CDP_IMPORT_PUBLIC_KEY): ${(err as Error).message}`, undefined);
      }
      return post('/v2/evm/accounts/import', { name, encryptedPrivateKey: encrypted.toString('base64') });
    },
  };
}
