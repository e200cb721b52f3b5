/**
 * A local Turnstile-style siteverify server (docs/configuration.md TURNSTILE_VERIFY_URL): form POST of
 * `secret`, `response`, `remoteip`; answers JSON `{success, "error-codes"}` as the real one does.
 * A token is accepted when it is in `validTokens` and the secret matches.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type SiteverifyCall = { secret: string | null; response: string | null; remoteip: string | null; contentType: string | undefined };

export type FakeSiteverify = {
  url: string;
  calls: SiteverifyCall[];
  validTokens: Set<string>;
  close(): Promise<void>;
};

export async function startFakeSiteverify(options: { secret: string; validTokens?: string[] }): Promise<FakeSiteverify> {
  const calls: SiteverifyCall[] = [];
  const validTokens = new Set(options.validTokens ?? []);
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const call: SiteverifyCall = {
        secret: form.get('secret'),
        response: form.get('response'),
        remoteip: form.get('remoteip'),
        contentType: req.headers['content-type'],
      };
      calls.push(call);
      res.setHeader('content-type', 'application/json');
      if (req.method !== 'POST' || req.url !== '/turnstile/v0/siteverify') {
        res.statusCode = 405;
        res.end(JSON.stringify({ success: false, 'error-codes': ['bad-request'] }));
        return;
      }
      const errors: string[] = [];
      if (call.secret !== options.secret) errors.push('invalid-input-secret');
      if (!call.response) errors.push('missing-input-response');
      else if (!validTokens.has(call.response)) errors.push('invalid-input-response');
      res.end(JSON.stringify({ success: errors.length === 0, 'error-codes': errors, ...(errors.length ? {} : { hostname: 'localhost' }) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/turnstile/v0/siteverify`,
    calls,
    validTokens,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
