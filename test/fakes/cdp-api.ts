/**
 * A local Coinbase Developer Platform v2 EVM accounts API (what CDP_API_URL points at in tests):
 * `POST /platform/v2/evm/accounts` and `POST /platform/v2/evm/accounts/import`, with the real
 * authentication checked: the `Authorization` bearer JWT (ES256 or EdDSA with the API key, `kid`,
 * `uris` naming this very request, not expired) and the `X-Wallet-Auth` JWT (ES256 with the wallet
 * secret, `uris` and `reqHash` of the sorted body). Imported keys are decrypted with the RSA key
 * whose public half the platform was given; the address is derived from them.
 */
import { constants, createHash, createPublicKey, generateKeyPairSync, type KeyObject, privateDecrypt, verify } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { sortedJson } from '../../src/domains/wallet/cdp.client.ts';
import { readBody } from './read-body.ts';

export type FakeCdp = {
  url: string;
  /** the settings the platform needs to talk to this fake */
  env: Record<string, string>;
  accounts: Map<string, { name: string; privateKey: string }>;
  requests: { path: string; authOk: boolean; walletAuthOk: boolean }[];
  failWith?: number;
  close(): Promise<void>;
};

function checkJwt(
  token: string | undefined,
  key: KeyObject,
  alg: 'ES256' | 'EdDSA',
): { header: Record<string, unknown>; claims: Record<string, unknown> } | undefined {
  if (!token) return undefined;
  const [h, c, s] = token.split('.');
  if (!h || !c || !s) return undefined;
  const header = JSON.parse(Buffer.from(h, 'base64url').toString());
  const claims = JSON.parse(Buffer.from(c, 'base64url').toString());
  if (header.alg !== alg) return undefined;
  const data = Buffer.from(`${h}.${c}`);
  const sig = Buffer.from(s, 'base64url');
  const ok = alg === 'ES256' ? verify('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, sig) : verify(null, data, key, sig);
  return ok ? { header, claims } : undefined;
}

export async function startFakeCdp(options: { apiKeyType?: 'ec' | 'ed25519' } = {}): Promise<FakeCdp> {
  const apiKeyId = 'organizations/test/apiKeys/fake';
  let apiKeySecret: string;
  let apiPublic: KeyObject;
  let apiAlg: 'ES256' | 'EdDSA';
  if (options.apiKeyType === 'ed25519') {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const seed = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(-32);
    const pub = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
    apiKeySecret = Buffer.concat([seed, pub]).toString('base64');
    apiPublic = publicKey;
    apiAlg = 'EdDSA';
  } else {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    apiKeySecret = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    apiPublic = publicKey;
    apiAlg = 'ES256';
  }
  const wallet = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });

  const state: FakeCdp = { url: '', env: {}, accounts: new Map(), requests: [], close: async () => {} };
  const server = createServer(async (req, res) => {
    const raw = await readBody(req);
    const path = req.url ?? '';
    const send = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const uri = `${req.method} ${req.headers.host}${path}`;
    const auth = checkJwt(String(req.headers.authorization ?? '').replace(/^Bearer /, ''), apiPublic, apiAlg);
    const now = Math.floor(Date.now() / 1000);
    const authOk = Boolean(
      auth &&
        auth.header.kid === apiKeyId &&
        auth.claims.sub === apiKeyId &&
        (auth.claims.uris as string[] | undefined)?.[0] === uri &&
        Number(auth.claims.exp) > now,
    );
    let body: Record<string, unknown> = {};
    try {
      body = raw ? JSON.parse(raw) : {};
    } catch {
      return send(400, { errorType: 'invalid_request', errorMessage: 'body is not JSON' });
    }
    const walletJwt = checkJwt(req.headers['x-wallet-auth'] as string | undefined, wallet.publicKey, 'ES256');
    const walletAuthOk = Boolean(
      walletJwt &&
        (walletJwt.claims.uris as string[] | undefined)?.[0] === uri &&
        walletJwt.claims.reqHash === createHash('sha256').update(sortedJson(body)).digest('hex'),
    );
    state.requests.push({ path, authOk, walletAuthOk });
    if (!authOk) return send(401, { errorType: 'unauthorized', errorMessage: 'invalid API key JWT' });
    if (!walletAuthOk) return send(401, { errorType: 'unauthorized', errorMessage: 'invalid wallet auth JWT' });
    if (state.failWith) return send(state.failWith, { errorType: 'internal_server_error', errorMessage: 'the fake CDP was told to fail' });
    const name = String(body.name ?? '');
    if ([...state.accounts.values()].some((a) => a.name === name))
      return send(409, { errorType: 'already_exists', errorMessage: 'an account with this name exists' });
    let privateKey: string;
    if (req.method === 'POST' && path === '/platform/v2/evm/accounts') privateKey = generatePrivateKey();
    else if (req.method === 'POST' && path === '/platform/v2/evm/accounts/import') {
      try {
        const bytes = privateDecrypt(
          { key: rsa.privateKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
          Buffer.from(String(body.encryptedPrivateKey), 'base64'),
        );
        privateKey = `0x${bytes.toString('hex')}`;
      } catch {
        return send(400, { errorType: 'invalid_request', errorMessage: 'cannot decrypt the private key' });
      }
    } else return send(404, { errorType: 'not_found', errorMessage: 'no such route' });
    const address = privateKeyToAccount(privateKey as `0x${string}`).address;
    state.accounts.set(address, { name, privateKey });
    return send(201, { address, name, policies: [], createdAt: new Date().toISOString(), updatedAt: new Date().toISOString() });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.env = {
    CDP_API_URL: state.url,
    CDP_API_KEY_ID: apiKeyId,
    CDP_API_KEY_SECRET: apiKeySecret,
    CDP_WALLET_SECRET: wallet.privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64'),
    CDP_PROJECT_ID: 'fake-project',
    CDP_IMPORT_PUBLIC_KEY: createPublicKey(rsa.privateKey).export({ format: 'pem', type: 'spki' }).toString(),
  };
  state.close = () => new Promise<void>((r) => server.close(() => r()));
  return state;
}
