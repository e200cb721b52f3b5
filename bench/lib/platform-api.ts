/**
 * A platform the benches built in their own process, served as `npm start` serves it: both apps
 * listening on their ports and the workers started; and the web API called as a user would (JSON
 * bodies, a session cookie).
 */
import type { AddressInfo } from 'node:net';
import type { Platform } from '../../src/platform.ts';

export type ApiCall = (method: string, path: string, body: unknown, headers?: Record<string, string>) => Promise<Response>;

export async function servePlatform(platform: Platform, ports: { web: number; backend: number }) {
  const web = await platform.buildWebApp();
  const backend = await platform.buildBackendApp();
  await web.listen({ host: '127.0.0.1', port: ports.web });
  await backend.listen({ host: '127.0.0.1', port: ports.backend });
  await platform.startWorkers();
  const base = `http://127.0.0.1:${(web.server.address() as AddressInfo).port}`;
  const call: ApiCall = (method, path, body, headers = {}) =>
    fetch(`${base}${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  return { web, backend, base, call };
}

/**
 * Signs up `email` through the API and signs in: the session cookie. `beforeSignIn` runs between
 * the two (a bench giving the account a plan, as an admin would).
 */
export async function signUp(call: ApiCall, email: string, beforeSignIn?: () => Promise<unknown>): Promise<string> {
  await call('POST', '/api/register', { email, password: 'bench-password-long', name: 'Bench' });
  await beforeSignIn?.();
  const login = await call('POST', '/api/auth/login', { email, password: 'bench-password-long' });
  return /service-session=[^;]+/.exec(login.headers.get('set-cookie') ?? '')![0];
}
