/**
 * A local OpenID Connect provider for the identity-provider sign-in tests (§4.1) and the
 * security-event tests (§6, which sign their event tokens with `sign` and the same JWKS):
 * discovery, an authorize endpoint that redirects straight back with a code (the "user" who
 * consents is `provider.user`), a token endpoint that checks the client, the redirect URI and the
 * PKCE verifier and issues RS256 ID tokens signed with its own key, the JWKS, and userinfo.
 *
 * `provider.fault` makes the next ID tokens bad in one way: wrong issuer, wrong audience, expired,
 * wrong nonce, a `kid` the JWKS does not hold, `alg: none`, a signature by another key; or makes
 * the token endpoint refuse the code.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';

export type FakeOidcUser = { sub: string; email?: string; email_verified?: boolean; name?: string };
export type FakeOidcFault =
  | 'wrong-issuer'
  | 'wrong-audience'
  | 'expired'
  | 'wrong-nonce'
  | 'unknown-kid'
  | 'alg-none'
  | 'bad-signature'
  | 'token-error'
  | null;

export type FakeOidcProvider = {
  /** the issuer, e.g. http://127.0.0.1:PORT */
  issuer: string;
  clientId: string;
  clientSecret: string;
  kid: string;
  jwks: { keys: JWK[] };
  /** signs any payload with the provider's key (RS256, its kid) */
  sign(payload: JWTPayload, options?: { typ?: string }): Promise<string>;
  user: FakeOidcUser;
  fault: FakeOidcFault;
  /** the ID token carries only `sub` (no email or name): the client must ask userinfo */
  idTokenWithoutEmail: boolean;
  /** what /authorize did: `denied` redirects back with error=access_denied */
  authorizeMode: 'consent' | 'denied';
  /** the query of each /authorize request */
  authorizeRequests: URLSearchParams[];
  /** the form of each /token request (secrets included: tests only) */
  tokenRequests: URLSearchParams[];
  /** the refresh token the next code exchange issues */
  refreshToken: string;
  close(): Promise<void>;
};

type Grant = { clientId: string; redirectUri: string; nonce: string | null; challenge: string | null; user: FakeOidcUser };

export async function startFakeOidcProvider(options: { clientId?: string; clientSecret?: string } = {}): Promise<FakeOidcProvider> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const other = await generateKeyPair('RS256');
  const kid = 'fake-key-1';
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
  const codes = new Map<string, Grant>();

  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', provider.issuer);
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    };
    try {
      if (url.pathname === '/.well-known/openid-configuration') {
        return send(200, {
          issuer: provider.issuer,
          authorization_endpoint: `${provider.issuer}/authorize`,
          token_endpoint: `${provider.issuer}/token`,
          userinfo_endpoint: `${provider.issuer}/userinfo`,
          jwks_uri: `${provider.issuer}/jwks`,
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256'],
          code_challenge_methods_supported: ['S256'],
          token_endpoint_auth_methods_supported: ['client_secret_post', 'client_secret_basic'],
        });
      }
      if (url.pathname === '/jwks') return send(200, provider.jwks);
      if (url.pathname === '/authorize') {
        const q = url.searchParams;
        provider.authorizeRequests.push(q);
        const back = new URL(q.get('redirect_uri') ?? '');
        if (q.get('state')) back.searchParams.set('state', q.get('state')!);
        if (provider.authorizeMode === 'denied') {
          back.searchParams.set('error', 'access_denied');
        } else {
          const code = randomBytes(16).toString('hex');
          codes.set(code, {
            clientId: q.get('client_id') ?? '',
            redirectUri: q.get('redirect_uri') ?? '',
            nonce: q.get('nonce'),
            challenge: q.get('code_challenge'),
            user: { ...provider.user },
          });
          back.searchParams.set('code', code);
        }
        res.writeHead(302, { location: back.toString() });
        return res.end();
      }
      if (url.pathname === '/token' && req.method === 'POST') {
        let raw = '';
        for await (const c of req) raw += c;
        const form = new URLSearchParams(raw);
        provider.tokenRequests.push(form);
        const basic = req.headers.authorization?.startsWith('Basic ')
          ? Buffer.from(req.headers.authorization.slice(6), 'base64').toString().split(':').map(decodeURIComponent)
          : null;
        const clientId = basic?.[0] ?? form.get('client_id');
        const secret = basic?.[1] ?? form.get('client_secret');
        if (clientId !== provider.clientId || secret !== provider.clientSecret) return send(401, { error: 'invalid_client' });
        const grant = codes.get(form.get('code') ?? '');
        codes.delete(form.get('code') ?? '');
        if (!grant || provider.fault === 'token-error') return send(400, { error: 'invalid_grant' });
        if (grant.redirectUri !== form.get('redirect_uri')) return send(400, { error: 'invalid_grant', error_description: 'redirect_uri' });
        const verifier = form.get('code_verifier') ?? '';
        if (!grant.challenge || createHash('sha256').update(verifier).digest('base64url') !== grant.challenge) {
          return send(400, { error: 'invalid_grant', error_description: 'PKCE' });
        }
        return send(200, {
          access_token: `at-${randomBytes(8).toString('hex')}`,
          token_type: 'Bearer',
          expires_in: 3600,
          refresh_token: provider.refreshToken,
          scope: 'openid email profile',
          id_token: await idToken(grant),
        });
      }
      if (url.pathname === '/userinfo') return send(200, { ...provider.user });
      send(404, { error: 'not found' });
    } catch (err) {
      send(500, { error: (err as Error).message });
    }
  });

  async function idToken(grant: Grant): Promise<string> {
    const f = provider.fault;
    const now = Math.floor(Date.now() / 1000);
    const claims: JWTPayload = {
      ...(provider.idTokenWithoutEmail ? { sub: grant.user.sub } : grant.user),
      iss: f === 'wrong-issuer' ? 'https://evil.example' : provider.issuer,
      aud: f === 'wrong-audience' ? 'someone-else' : grant.clientId,
      iat: f === 'expired' ? now - 7200 : now,
      exp: f === 'expired' ? now - 3600 : now + 3600,
      ...(grant.nonce ? { nonce: f === 'wrong-nonce' ? 'not-the-nonce' : grant.nonce } : {}),
    };
    if (f === 'alg-none') {
      const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
      return `${enc({ alg: 'none', typ: 'JWT' })}.${enc(claims)}.`;
    }
    const header = { alg: 'RS256', kid: f === 'unknown-kid' ? 'no-such-key' : kid, typ: 'JWT' };
    return new SignJWT(claims).setProtectedHeader(header).sign(f === 'bad-signature' ? other.privateKey : privateKey);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const provider: FakeOidcProvider = {
    issuer: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    clientId: options.clientId ?? 'fake-client-id',
    clientSecret: options.clientSecret ?? 'fake-client-secret',
    kid,
    jwks: { keys: [jwk] },
    sign: (payload, o = {}) =>
      new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid, ...(o.typ ? { typ: o.typ } : {}) }).sign(privateKey),
    user: { sub: 'idp-user-1', email: 'someone@example.com', email_verified: true, name: 'Some One' },
    fault: null,
    idTokenWithoutEmail: false,
    authorizeMode: 'consent',
    authorizeRequests: [],
    tokenRequests: [],
    refreshToken: `rt-${randomBytes(12).toString('hex')}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return provider;
}
