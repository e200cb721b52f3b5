/**
 * A local code host (GitHub-style OAuth app) for the code-host sign-in tests (§4.1):
 * `/login/oauth/authorize` redirects straight back with a code (or `error=access_denied`),
 * `/login/oauth/access_token` answers JSON (GitHub's 200 `{error}` for a refused code), and the
 * API's `/user` and `/user/emails` answer for the bearer of the issued access token. One server
 * plays both CODEHOST_URL and CODEHOST_API_URL (the API under `/api`).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FakeCodehostEmail = { email: string; primary: boolean; verified: boolean };
export type FakeCodehostUser = { id: number; login: string; name: string | null; emails: FakeCodehostEmail[] };

export type FakeCodehost = {
  url: string;
  apiUrl: string;
  clientId: string;
  clientSecret: string;
  user: FakeCodehostUser;
  authorizeMode: 'consent' | 'denied';
  /** the token endpoint refuses every code (200 `{error:'bad_verification_code'}`) */
  refuseCodes: boolean;
  /** the API answers 500 */
  apiDown: boolean;
  authorizeRequests: URLSearchParams[];
  tokenRequests: { accept: string | undefined; form: URLSearchParams }[];
  close(): Promise<void>;
};

export async function startFakeCodehost(): Promise<FakeCodehost> {
  const codes = new Map<string, FakeCodehostUser>();
  const tokens = new Map<string, FakeCodehostUser>();
  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', host.url);
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (url.pathname === '/login/oauth/authorize') {
      const q = url.searchParams;
      host.authorizeRequests.push(q);
      const back = new URL(q.get('redirect_uri') ?? '');
      if (q.get('state')) back.searchParams.set('state', q.get('state')!);
      if (host.authorizeMode === 'denied') back.searchParams.set('error', 'access_denied');
      else {
        const code = randomBytes(10).toString('hex');
        codes.set(code, structuredClone(host.user));
        back.searchParams.set('code', code);
      }
      res.writeHead(302, { location: back.toString() });
      return res.end();
    }
    if (url.pathname === '/login/oauth/access_token' && req.method === 'POST') {
      let raw = '';
      for await (const c of req) raw += c;
      const form = new URLSearchParams(raw);
      host.tokenRequests.push({ accept: req.headers.accept, form });
      const user = codes.get(form.get('code') ?? '');
      codes.delete(form.get('code') ?? '');
      if (form.get('client_id') !== host.clientId || form.get('client_secret') !== host.clientSecret)
        return send(200, { error: 'incorrect_client_credentials' });
      if (!user || host.refuseCodes) return send(200, { error: 'bad_verification_code' });
      const token = `gho_${randomBytes(12).toString('hex')}`;
      tokens.set(token, user);
      return send(200, { access_token: token, token_type: 'bearer', scope: 'read:user,user:email' });
    }
    if (url.pathname.startsWith('/api/')) {
      if (host.apiDown) return send(500, { message: 'down' });
      const user = tokens.get(req.headers.authorization?.replace(/^Bearer /, '') ?? '');
      if (!user) return send(401, { message: 'Bad credentials' });
      if (url.pathname === '/api/user') return send(200, { id: user.id, login: user.login, name: user.name });
      if (url.pathname === '/api/user/emails') return send(200, user.emails);
    }
    send(404, { message: 'Not Found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const host: FakeCodehost = {
    url,
    apiUrl: `${url}/api`,
    clientId: 'fake-codehost-client',
    clientSecret: 'fake-codehost-secret',
    user: { id: 4242, login: 'octo', name: 'Octo Cat', emails: [{ email: 'octo@example.com', primary: true, verified: true }] },
    authorizeMode: 'consent',
    refuseCodes: false,
    apiDown: false,
    authorizeRequests: [],
    tokenRequests: [],
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return host;
}
